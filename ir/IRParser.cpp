//===- IRParser.cpp - Reads the textual IR back ----------------------------===//
#include "ir/IRParser.h"

#include "format/Limits.h"

#include "support/Lexer.h"
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

using namespace mist;

namespace {

class IRParser {
public:
  IRParser(llvm::StringRef text, DiagnosticEngine &diag) : lex(text), diag(diag) { advance(); }

  std::unique_ptr<Module> parse();

private:
  static constexpr unsigned maxNesting = 200;

  void advance() { tok = lex.next(); }
  bool error(const llvm::Twine &msg) { return errorAt(tok, msg); }
  /// Reports at `at`, for checks made after the offending token was consumed.
  bool errorAt(const Token &at, const llvm::Twine &msg) {
    if (!failedOnce)
      diag.error(at.loc(), msg, at.range);
    failedOnce = true;
    return false;
  }
  bool expect(Tok k, const char *context) {
    if (tok.kind != k)
      return error("expected '" + tokenSpelling(k) + "' " + context);
    advance();
    return true;
  }
  bool isWord(llvm::StringRef w) const { return tok.is(Tok::Ident) && tok.text == w; }
  bool expectWord(llvm::StringRef w, const char *context) {
    if (!isWord(w))
      return error("expected '" + w + "' " + context);
    advance();
    return true;
  }

  bool parseHeader();
  bool parseSym();
  bool parseTrain();
  bool parseState();
  bool parseType(Value &v);
  bool parseExpr(Expr &out, unsigned depth = 0);
  bool parseTerm(Expr &out, unsigned depth);
  bool parseUnary(Expr &out, unsigned depth);
  bool parsePrimary(Expr &out, unsigned depth);
  bool parseInt(int64_t &out);
  bool parseReal(double &out, const char *what);
  bool parseRegion(Region &r);
  bool parseBlock(Block &b);
  bool parseOp(Block &b);
  bool parseAttr(Attr &out);
  bool parseCost(OpCost &c);
  Value *lookupValue();
  bool defineValue(Value &v, const Token &nameTok);

  Lexer lex;
  Token tok;
  DiagnosticEngine &diag;
  std::unique_ptr<Module> m;
  std::unordered_map<std::string, Value *> values;
  bool failedOnce = false;
};

bool IRParser::parseInt(int64_t &out) {
  bool neg = false;
  if (tok.is(Tok::Minus)) {
    neg = true;
    advance();
  }
  if (!tok.is(Tok::Integer))
    return error("expected an integer");
  errno = 0;
  std::string text = tok.text.str();
  long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE)
    return error("integer '" + tok.text + "' is too large");
  out = neg ? -v : v;
  advance();
  return true;
}

/// real := ['-'] (REAL | INTEGER), finite
bool IRParser::parseReal(double &out, const char *what) {
  Token start = tok;
  bool neg = false;
  if (tok.is(Tok::Minus)) {
    neg = true;
    advance();
  }
  if (!tok.is(Tok::Real) && !tok.is(Tok::Integer))
    return errorAt(start, llvm::Twine("expected a number for '") + what + "'");
  double v = std::strtod(tok.text.str().c_str(), nullptr);
  if (!std::isfinite(v))
    return error("number " + tok.text + " is out of range");
  out = neg ? -v : v;
  advance();
  return true;
}

/// expr := term {('+' | '-') term}
bool IRParser::parseExpr(Expr &out, unsigned depth) {
  if (depth > maxNesting)
    return error("expression nested too deeply");
  if (!parseTerm(out, depth))
    return false;
  while (tok.is(Tok::Plus) || tok.is(Tok::Minus)) {
    bool minus = tok.is(Tok::Minus);
    advance();
    Expr rhs;
    if (!parseTerm(rhs, depth))
      return false;
    out = minus ? out - rhs : out + rhs;
  }
  return true;
}

/// term := unary {('*' | '/') unary}
bool IRParser::parseTerm(Expr &out, unsigned depth) {
  if (!parseUnary(out, depth))
    return false;
  while (tok.is(Tok::Star) || tok.is(Tok::Slash)) {
    bool div = tok.is(Tok::Slash);
    Token opTok = tok;
    advance();
    Expr rhs;
    if (!parseUnary(rhs, depth))
      return false;
    if (div && rhs.expand().is_zero()) {
      tok = opTok;
      return error("division by zero");
    }
    out = div ? out / rhs : out * rhs;
  }
  return true;
}

/// unary := '-' unary | primary ['^' integer]
bool IRParser::parseUnary(Expr &out, unsigned depth) {
  if (depth > maxNesting)
    return error("expression nested too deeply");
  if (tok.is(Tok::Minus)) {
    advance();
    if (!parseUnary(out, depth + 1))
      return false;
    out = -out;
    return true;
  }
  if (!parsePrimary(out, depth))
    return false;
  if (tok.is(Tok::Caret)) {
    advance();
    Token expTok = tok;
    int64_t p;
    if (!parseInt(p))
      return false;
    if (p < -64 || p > 64)
      return errorAt(expTok, "exponent must be between -64 and 64");
    out = GiNaC::pow(out, static_cast<int>(p));
  }
  return true;
}

/// primary := integer | symbol | '(' expr ')'
bool IRParser::parsePrimary(Expr &out, unsigned depth) {
  if (tok.is(Tok::Integer)) {
    std::string text = tok.text.str();
    if (text.size() > 30)
      return error("integer '" + tok.text + "' is too large");
    out = GiNaC::numeric(text.c_str());
    advance();
    return true;
  }
  if (tok.is(Tok::Ident)) {
    const Symbol *s = m->symbols.lookup(tok.text.str());
    if (!s)
      return error("use of undeclared symbol '" + tok.text + "'");
    out = s->sym;
    advance();
    return true;
  }
  if (tok.is(Tok::LParen)) {
    advance();
    if (!parseExpr(out, depth + 1))
      return false;
    return expect(Tok::RParen, "to close the expression");
  }
  return error("expected a size expression");
}

/// sym := 'sym' ident ['=' integer] ':' ('batch' | 'seq' | 'model' | 'tp')
bool IRParser::parseSym() {
  advance();
  if (!tok.is(Tok::Ident))
    return error("expected a symbol name");
  Token name = tok;
  advance();
  std::optional<int64_t> value;
  if (tok.is(Tok::Equal)) {
    advance();
    Token valueTok = tok;
    int64_t v;
    if (!parseInt(v))
      return false;
    if (v <= 0)
      return errorAt(valueTok, "symbol values must be positive");
    // The front end's bound on the sizes a .mist file gives.
    if (valueTok.text.size() > limits::maxIntegerDigits)
      return errorAt(valueTok, "symbol value " + valueTok.text.str() + " is too large (at most " +
                                   std::to_string(limits::maxIntegerDigits) + " digits)");
    value = v;
  }
  if (!expect(Tok::Colon, "before the symbol kind"))
    return false;
  std::optional<SymbolKind> kind;
  for (auto [w, k] : {std::pair{"batch", SymbolKind::Batch},
                      {"seq", SymbolKind::Seq},
                      {"model", SymbolKind::Model},
                      {"tp", SymbolKind::TP}})
    if (isWord(w))
      kind = k;
  if (tok.is(Tok::KwModel)) // `model` is a keyword of the source language
    kind = SymbolKind::Model;
  if (!kind)
    return error("expected a symbol kind (batch, seq, model or tp)");
  advance();
  if (!m->symbols.declare(name.text.str(), *kind, value))
    return errorAt(name, "symbol '" + name.text + "' is declared twice");
  return true;
}

/// train := 'train' '{' key '=' value {',' key '=' value} '}'
bool IRParser::parseTrain() {
  m->train.loc = tok.loc();
  advance();
  if (!expect(Tok::LBrace, "after 'train'"))
    return false;
  TrainConfig &t = m->train;
  while (!tok.is(Tok::RBrace)) {
    if (!tok.is(Tok::Ident))
      return error("expected a train key");
    Token keyTok = tok;
    std::string key = tok.text.str();
    advance();
    if (!expect(Tok::Equal, "after the train key"))
      return false;
    if (tok.is(Tok::String)) {
      std::string v = tok.text.str();
      if (key == "optimizer") {
        if (v != "adamw" && v != "sgd")
          return error("unknown optimizer '" + v + "'");
        t.optimizer = v;
      } else if (key == "dtype" || key == "master_dtype" || key == "grad_dtype") {
        auto dt = parseDType(v);
        if (!dt || *dt == DType::I32 || *dt == DType::U8)
          return error("unknown dtype '" + v + "'");
        if (key == "grad_dtype")
          t.gradDtype = *dt;
        else
          (key == "dtype" ? t.dtype : t.masterDtype) = *dt;
      } else if (key == "lr_decay") {
        if (!isLrDecay(v))
          return error("unknown lr_decay '" + v + "' (cosine, linear, constant, wsd)");
        t.lrDecay = v;
      } else if (key == "cluster") {
        t.cluster = v;
        t.clusterLoc = tok.loc();
      } else if (key == "no_decay") {
        t.decayBiases = t.decayNorms = t.decayEmbeddings = true;
        llvm::SmallVector<llvm::StringRef, 3> kinds;
        llvm::StringRef(v).split(kinds, ',', -1, /*KeepEmpty=*/false);
        for (llvm::StringRef k : kinds) {
          bool *decays = k == "bias"        ? &t.decayBiases
                         : k == "norm"      ? &t.decayNorms
                         : k == "embedding" ? &t.decayEmbeddings
                                            : nullptr;
          if (!decays)
            return error("unknown no_decay kind '" + k.str() + "' (bias, norm, embedding)");
          *decays = false;
        }
      } else {
        return errorAt(keyTok, "unknown train key '" + key + "'");
      }
      advance();
    } else if (key == "global_batch" || key == "warmup_steps") {
      int64_t v;
      if (!parseInt(v))
        return false;
      (key == "global_batch" ? t.globalBatch : t.warmupSteps) = v;
    } else if (key == "min_lr" || key == "decay_fraction") {
      double v = 0;
      if (!parseReal(v, key.c_str()))
        return false;
      (key == "min_lr" ? t.minLr : t.decayFraction) = v;
    } else {
      double *slot = key == "lr"             ? &t.lr
                     : key == "beta1"        ? &t.beta1
                     : key == "beta2"        ? &t.beta2
                     : key == "weight_decay" ? &t.weightDecay
                     : key == "eps"          ? &t.eps
                     : key == "grad_clip"    ? &t.gradClip
                                             : nullptr;
      if (!slot)
        return errorAt(keyTok, "unknown train key '" + key + "'");
      if (!parseReal(*slot, key.c_str()))
        return false;
    }
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  return expect(Tok::RBrace, "to close 'train'");
}

/// state := 'state' '{' [flag {',' flag}] '}'
bool IRParser::parseState() {
  advance();
  if (!expect(Tok::LBrace, "after 'state'"))
    return false;
  while (tok.is(Tok::Ident)) {
    bool *flag = tok.text == "shaped"           ? &m->state.shaped
                 : tok.text == "tp_sharded"     ? &m->state.tpSharded
                 : tok.text == "sequence_split" ? &m->state.sequenceSplit
                 : tok.text == "differentiated" ? &m->state.differentiated
                 : tok.text == "costed"         ? &m->state.costed
                                                : nullptr;
    if (!flag)
      return error("unknown state flag '" + tok.text + "'");
    *flag = true;
    advance();
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  return expect(Tok::RBrace, "to close 'state'");
}

/// type := '?' | role dtype '[' [expr {',' expr}] ']' ['shard' '(' int ')'] ['partial']
bool IRParser::parseType(Value &v) {
  if (tok.is(Tok::Question)) {
    advance();
    v.typed = false;
    return true;
  }
  auto role = tok.is(Tok::Ident) ? parseRole(tok.text) : std::nullopt;
  if (!role)
    return error("expected a role (act, param, grad or opt) or '?'");
  advance();
  auto dtype = tok.is(Tok::Ident) ? parseDType(tok.text) : std::nullopt;
  if (!dtype)
    return error("expected a dtype (bf16, f16, f32, i32 or u8)");
  advance();
  TensorType t;
  t.role = *role;
  t.dtype = *dtype;
  if (!expect(Tok::LBracket, "to open the shape"))
    return false;
  while (!tok.is(Tok::RBracket)) {
    Token axisTok = tok;
    Expr d;
    if (!parseExpr(d))
      return false;
    t.shape.push_back(d);
    if (t.shape.size() > limits::maxTensorAxes)
      return errorAt(axisTok,
                     "tensors have at most " + std::to_string(limits::maxTensorAxes) + " axes");
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  if (!expect(Tok::RBracket, "to close the shape"))
    return false;
  if (isWord("shard")) {
    advance();
    int64_t axis;
    if (!expect(Tok::LParen, "after 'shard'"))
      return false;
    Token axisTok = tok;
    if (!parseInt(axis))
      return false;
    if (axis < 0 || axis >= static_cast<int64_t>(t.shape.size()))
      return errorAt(axisTok, "shard axis " + std::to_string(axis) +
                                  " is out of range for a rank-" + std::to_string(t.shape.size()) +
                                  " tensor");
    t.shardAxis = static_cast<int>(axis);
    if (!expect(Tok::RParen, "after the shard axis"))
      return false;
  }
  if (isWord("partial")) {
    advance();
    t.partial = true;
  }
  v.type = std::move(t);
  v.typed = true;
  return true;
}

Value *IRParser::lookupValue() {
  auto it = values.find(tok.text.str());
  if (it == values.end()) {
    error("use of undefined value '%" + tok.text + "'");
    return nullptr;
  }
  advance();
  return it->second;
}

bool IRParser::defineValue(Value &v, const Token &nameTok) {
  v.name = nameTok.text.str();
  if (!m->reserveName(v.name))
    return errorAt(nameTok, "value '%" + nameTok.text + "' is defined twice");
  values[v.name] = &v;
  return true;
}

/// attr := string | 'true' | 'false' | real | expr
bool IRParser::parseAttr(Attr &out) {
  if (tok.is(Tok::String)) {
    out = EnumWord{tok.text.str()};
    advance();
    return true;
  }
  if (tok.is(Tok::KwTrue) || tok.is(Tok::KwFalse)) {
    out = tok.is(Tok::KwTrue);
    advance();
    return true;
  }
  // A real, possibly negative (the printer writes `eps = -1.0`); `-` before
  // anything else starts a size.
  Lexer afterMinus = lex;
  if (tok.is(Tok::Real) || (tok.is(Tok::Minus) && afterMinus.next().is(Tok::Real))) {
    double v;
    if (!parseReal(v, "the attribute"))
      return false;
    out = v;
    return true;
  }
  Expr e;
  if (!parseExpr(e))
    return false;
  out = e;
  return true;
}

/// cost := 'cost' '(' key '=' expr {',' key '=' expr} ')'
bool IRParser::parseCost(OpCost &c) {
  advance();
  if (!expect(Tok::LParen, "after 'cost'"))
    return false;
  while (tok.is(Tok::Ident)) {
    Expr *slot = tok.text == "flops"   ? &c.flops
                 : tok.text == "read"  ? &c.read
                 : tok.text == "write" ? &c.write
                 : tok.text == "saved" ? &c.saved
                 : tok.text == "comm"  ? &c.comm
                                       : nullptr;
    if (!slot)
      return error("unknown cost field '" + tok.text + "'");
    advance();
    if (!expect(Tok::Equal, "after the cost field") || !parseExpr(*slot))
      return false;
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  return expect(Tok::RParen, "to close 'cost'");
}

/// op := results '=' opname [operands] ['{' attrs '}'] ':' types [cost]
bool IRParser::parseOp(Block &b) {
  llvm::SMLoc loc = tok.loc();
  std::vector<Token> resultNames;
  while (true) {
    if (!tok.is(Tok::ValueName))
      return error("expected a result name");
    resultNames.push_back(tok);
    advance();
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  if (!expect(Tok::Equal, "after the result names"))
    return false;
  auto kind = tok.is(Tok::Ident) ? parseOpName(tok.text) : std::nullopt;
  if (!kind)
    return error("unknown operation '" + tok.text + "'");
  advance();
  auto op = std::make_unique<Op>(*kind, loc);
  while (tok.is(Tok::ValueName)) {
    Value *v = lookupValue();
    if (!v)
      return false;
    op->operands.push_back(v);
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  if (tok.is(Tok::LBrace)) {
    advance();
    while (tok.is(Tok::Ident)) {
      Token keyTok = tok;
      std::string key = tok.text.str();
      advance();
      Attr a;
      if (!expect(Tok::Equal, "after the attribute name") || !parseAttr(a))
        return false;
      if (!op->attrs.emplace(key, a).second)
        return errorAt(keyTok, "attribute '" + key + "' is given twice");
      if (!tok.is(Tok::Comma))
        break;
      advance();
    }
    if (!expect(Tok::RBrace, "to close the attributes"))
      return false;
  }
  if (!expect(Tok::Colon, "before the result types"))
    return false;
  auto plural = [](size_t n, const char *word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  for (size_t i = 0; i < resultNames.size(); ++i) {
    if (i && !tok.is(Tok::Comma))
      return error("expected " + plural(resultNames.size(), "result type") +
                   ", one per result, got " + std::to_string(i));
    if (i)
      advance();
    auto v = std::make_unique<Value>();
    if (!parseType(*v))
      return false;
    v->def = op.get();
    op->results.push_back(std::move(v));
  }
  if (tok.is(Tok::Comma))
    return error("more result types than the " + plural(resultNames.size(), "result") +
                 " named before '='");
  if (isWord("cost")) {
    OpCost c;
    if (!parseCost(c))
      return false;
    op->cost = c;
  }
  // Names become visible only after the op, so an op cannot use its own result.
  for (size_t i = 0; i < resultNames.size(); ++i)
    if (!defineValue(*op->results[i], resultNames[i]))
      return false;
  b.ops.push_back(std::move(op));
  return true;
}

/// block := '(' [arg {',' arg}] ')' '{' {op} 'yield' [name {',' name}] '}'
bool IRParser::parseBlock(Block &b) {
  if (!expect(Tok::LParen, "to open the block arguments"))
    return false;
  while (tok.is(Tok::ValueName)) {
    Token name = tok;
    advance();
    auto v = std::make_unique<Value>();
    if (!expect(Tok::Colon, "after the argument name") || !parseType(*v) || !defineValue(*v, name))
      return false;
    b.args.push_back(std::move(v));
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  if (!expect(Tok::RParen, "to close the block arguments") ||
      !expect(Tok::LBrace, "to open the block"))
    return false;
  while (tok.is(Tok::ValueName))
    if (!parseOp(b))
      return false;
  if (!expectWord("yield", "at the end of the block"))
    return false;
  while (tok.is(Tok::ValueName)) {
    Value *v = lookupValue();
    if (!v)
      return false;
    b.yields.push_back(v);
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  return expect(Tok::RBrace, "to close the block");
}

/// region := name ['repeat' expr] block ['backward' block] ['summary' '(' entries ')']
bool IRParser::parseRegion(Region &r) {
  bool named = r.kind == RegionKind::Pre    ? tok.is(Tok::KwPre)
               : r.kind == RegionKind::Post ? tok.is(Tok::KwPost)
                                            : isWord("layer");
  if (!named)
    return error("expected the '" + std::string(regionName(r.kind)) + "' region");
  r.loc = tok.loc();
  advance();
  if (r.kind == RegionKind::Layer) {
    if (!expect(Tok::KwRepeat, "after 'layer'") || !parseExpr(r.repeat))
      return false;
  }
  if (!parseBlock(r.fwd))
    return false;
  if (isWord("backward")) {
    advance();
    r.bwd.emplace();
    if (!parseBlock(*r.bwd))
      return false;
  }
  if (isWord("summary")) {
    advance();
    r.summary.emplace();
    if (!expect(Tok::LParen, "after 'summary'"))
      return false;
    while (tok.is(Tok::Ident)) {
      std::string key = tok.text.str();
      advance();
      Expr e;
      if (!expect(Tok::Equal, "after the summary key") || !parseExpr(e))
        return false;
      r.summary->entries.emplace_back(key, e);
      if (!tok.is(Tok::Comma))
        break;
      advance();
    }
    if (!expect(Tok::RParen, "to close 'summary'"))
      return false;
  }
  return true;
}

bool IRParser::parseHeader() {
  while (true) {
    if (isWord("sym")) {
      if (!parseSym())
        return false;
    } else if (isWord("assume")) {
      advance();
      Assumption a;
      int64_t zero;
      if (!parseExpr(a.dividend) || !expect(Tok::Percent, "in the assumption") ||
          !parseExpr(a.divisor) || !expect(Tok::EqualEqual, "in the assumption"))
        return false;
      Token zeroTok = tok;
      if (!parseInt(zero))
        return false;
      if (zero != 0)
        return errorAt(zeroTok, "assumptions have the form 'a % b == 0'");
      m->assume(a.dividend, a.divisor);
    } else if (tok.is(Tok::KwTrain)) {
      if (!parseTrain())
        return false;
    } else if (isWord("state")) {
      if (!parseState())
        return false;
    } else if (tok.is(Tok::KwInput)) {
      advance();
      if (!tok.is(Tok::ValueName))
        return error("expected an input name");
      Token name = tok;
      advance();
      auto v = std::make_unique<Value>();
      if (!expect(Tok::Colon, "after the input name") || !parseType(*v) || !defineValue(*v, name))
        return false;
      m->inputs.push_back(std::move(v));
    } else {
      return true;
    }
  }
}

std::unique_ptr<Module> IRParser::parse() {
  m = std::make_unique<Module>();
  if (!expectWord("module", "at the start of the IR"))
    return nullptr;
  if (!tok.is(Tok::GlobalName)) {
    error("expected the module name '@name'");
    return nullptr;
  }
  m->name = tok.text.str();
  advance();
  if (!expect(Tok::LBrace, "to open the module") || !parseHeader())
    return nullptr;
  for (Region *r : m->regions)
    if (!parseRegion(*r))
      return nullptr;
  if (!expect(Tok::RBrace, "to close the module"))
    return nullptr;
  if (!tok.is(Tok::Eof)) {
    error("unexpected text after the module");
    return nullptr;
  }
  return std::move(m);
}

} // namespace

std::unique_ptr<Module> mist::parseIR(unsigned bufferId, DiagnosticEngine &diag) {
  llvm::StringRef text = diag.sourceMgr().getMemoryBuffer(bufferId)->getBuffer();
  return IRParser(text, diag).parse();
}
