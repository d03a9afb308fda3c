#!/usr/bin/env python3
"""Runs the mistc commands that README.md and docs/tutorial.md show, so a
doc cannot drift from the program (issue 48): every line of a ```sh block
that starts with `mistc` or `build/bin/mistc` runs, in document order, in one
scratch folder per document (so a command may read what an earlier one
wrote), with this build's mistc (first on PATH, and `build/` linked to this
build), through bash, so a continued line, a pipe or a redirect works as a
reader would type it; a non-zero exit fails, naming the file and line. The tutorial's model (its block that starts `// mymodel.mist`) is
written there first, and the examples, stdlib and tests folders are linked in.
Files the doc writes with `cat > FILE <<'TAG'` are written too. Commands of
other programs (mpirun, compilers, profilers on a GPU) are left out: they
need a built trainer or a GPU.

  check-doc-commands.py MISTC [DOC.md...]
"""
import os, re, subprocess, sys, tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DOCS = ["README.md", "docs/tutorial.md"]


def blocks(text):
    """(first line number, language, lines) of every fenced block."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang, body = i + 2, m.group(1), []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        out.append((start, lang, body))
        i += 1
    return out


def commands(doc):
    """(line number, command) of every mistc command in the doc's sh blocks."""
    out = []
    for start, lang, body in blocks(open(os.path.join(ROOT, doc)).read()):
        if lang != "sh":
            continue
        k = 0
        while k < len(body):
            first, line = k, body[k]
            heredoc = re.match(r"^cat > \S+ <<'(\w+)'\s*$", line.strip())
            if heredoc:  # a file the doc writes: run the whole here-document
                end = next((j for j in range(k + 1, len(body)) if body[j].strip() == heredoc.group(1)),
                           len(body) - 1)
                out.append((start + first, "\n".join(body[k:end + 1])))
                k = end + 1
                continue
            while line.rstrip().endswith("\\") and k + 1 < len(body):  # a continued line
                k += 1
                line = line.rstrip()[:-1] + " " + body[k].strip()
            k += 1
            text = line.split(" #")[0].strip() if not line.lstrip().startswith("#") else ""
            if re.match(r"^(build/bin/)?mistc(\s|$)", text):
                out.append((start + first, text))
    return out


def run(mistc, doc, folder):
    for name in ("examples", "stdlib", "tests"):
        os.symlink(os.path.join(ROOT, name), os.path.join(folder, name))
    os.symlink(os.path.dirname(os.path.dirname(mistc)), os.path.join(folder, "build"))
    env = dict(os.environ, PATH=os.path.dirname(mistc) + os.pathsep + os.environ.get("PATH", ""))
    for _, _, body in blocks(open(os.path.join(ROOT, doc)).read()):
        if body and body[0].startswith("// mymodel.mist"):
            open(os.path.join(folder, "mymodel.mist"), "w").write("\n".join(body) + "\n")
    failures = 0
    for line, text in commands(doc):
        p = subprocess.run(["bash", "-c", text], cwd=folder, env=env, capture_output=True,
                           text=True, timeout=600)
        status = "ok" if p.returncode == 0 else f"exit {p.returncode}"
        print(f"{doc}:{line}: {status}: {text.splitlines()[0]}")
        if p.returncode != 0:
            failures += 1
            print("  " + (p.stderr.strip().splitlines() or ["(no output)"])[-1])
    return failures


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check-doc-commands.py MISTC [DOC.md...]")
    mistc = os.path.abspath(sys.argv[1])
    failures = 0
    for doc in sys.argv[2:] or DOCS:
        with tempfile.TemporaryDirectory() as folder:
            failures += run(mistc, doc, folder)
    print(f"check-doc-commands: {failures} command(s) failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
