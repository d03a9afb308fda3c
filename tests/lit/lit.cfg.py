# lit configuration: FileCheck tests of mistc's dumps and diagnostics.
import os
import lit.formats

config.name = "mistc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mist", ".mir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = config.source_root
config.test_exec_root = os.path.join(os.path.dirname(config.mistc), "..", "tests", "lit-out")
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%mistc", config.mistc))
config.substitutions.append(("%mist-yaml-check", config.mist_yaml_check))
config.substitutions.append(("%mist-profile-cpu", config.mist_profile_cpu))
config.substitutions.append(("%examples", config.examples_dir))
config.substitutions.append(("%stdlib", config.stdlib_dir))
config.substitutions.append(("%clusters", config.clusters_dir))
config.substitutions.append(("%inputs", os.path.join(config.source_root, "Inputs")))

# Tests that render in a browser run only where headless Chromium is installed.
import shutil
if shutil.which("chromium"):
    config.available_features.add("chromium")
