//===- AST.cpp - Syntax tree dump -----------------------------------------===//
#include "frontend/AST.h"

using namespace mist;

ExprAST::~ExprAST() = default;

namespace {

void dumpExpr(const ExprAST &e, llvm::raw_ostream &os) {
  if (auto *n = llvm::dyn_cast<NumberExpr>(&e)) {
    os << n->text;
  } else if (auto *b = llvm::dyn_cast<BoolExpr>(&e)) {
    os << (b->value ? "true" : "false");
  } else if (auto *s = llvm::dyn_cast<StringExpr>(&e)) {
    os << '"' << s->value << '"';
  } else if (auto *id = llvm::dyn_cast<IdentExpr>(&e)) {
    os << id->name;
  } else if (auto *u = llvm::dyn_cast<UnaryExpr>(&e)) {
    os << "(neg ";
    dumpExpr(*u->operand, os);
    os << ")";
  } else if (auto *bin = llvm::dyn_cast<BinaryExpr>(&e)) {
    os << "(" << bin->op << " ";
    dumpExpr(*bin->lhs, os);
    os << " ";
    dumpExpr(*bin->rhs, os);
    os << ")";
  } else if (auto *c = llvm::dyn_cast<CallExpr>(&e)) {
    os << "(call " << c->callee;
    for (const CallArg &a : c->args) {
      os << " ";
      if (!a.name.empty())
        os << a.name << "=";
      dumpExpr(*a.value, os);
    }
    os << ")";
  } else if (auto *t = llvm::dyn_cast<TupleExpr>(&e)) {
    os << "(tuple";
    for (auto &el : t->elements) {
      os << " ";
      dumpExpr(*el, os);
    }
    os << ")";
  }
}

void dumpParams(const std::vector<ParamAST> &params, llvm::raw_ostream &os) {
  os << "(";
  for (size_t i = 0; i < params.size(); ++i) {
    os << (i ? ", " : "") << params[i].name;
    if (params[i].defaultValue) {
      os << " = ";
      dumpExpr(*params[i].defaultValue, os);
    }
  }
  os << ")";
}

void dumpStmts(const char *title, const StmtList &stmts, llvm::raw_ostream &os,
               const char *indent) {
  os << indent << title << "\n";
  for (const StmtAST &s : stmts) {
    os << indent << "  " << (s.isReturn ? "return" : "assign " + s.target) << " ";
    dumpExpr(*s.value, os);
    os << "\n";
  }
}

} // namespace

void mist::dumpAST(const FileAST &file, llvm::raw_ostream &os) {
  for (const ImportDecl &i : file.imports)
    os << "import \"" << i.path << "\"\n";
  for (const BlockDecl &b : file.blocks) {
    os << "block " << b.name;
    dumpParams(b.params, os);
    os << "\n";
    dumpStmts("body", b.body, os, "  ");
  }
  for (const ModelDecl &m : file.models) {
    os << "model " << m.name;
    dumpParams(m.params, os);
    os << "\n";
    for (const InputAST &in : m.inputs) {
      os << "  input " << in.name << " : " << in.dtype << "[";
      for (size_t i = 0; i < in.dims.size(); ++i) {
        os << (i ? ", " : "");
        dumpExpr(*in.dims[i], os);
      }
      os << "]\n";
    }
    if (m.hasPre)
      dumpStmts("pre", m.pre, os, "  ");
    if (m.hasRepeat) {
      os << "  repeat ";
      dumpExpr(*m.repeatCount, os);
      os << "\n";
      dumpStmts("body", m.body, os, "    ");
    }
    if (m.hasPost)
      dumpStmts("post", m.post, os, "  ");
  }
  for (const InstanceDecl &inst : file.instances) {
    os << "instance " << inst.name << " = ";
    dumpExpr(*inst.call, os);
    os << "\n";
  }
  for (const TrainDecl &t : file.trains) {
    os << "train\n";
    for (const TrainEntry &e : t.entries) {
      os << "  " << e.key << " = ";
      dumpExpr(*e.value, os);
      os << "\n";
    }
  }
}
