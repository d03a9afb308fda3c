//===- Milp.cpp - A small RAII wrapper over GLPK's MILP solver ------------===//
#include "tuner/Milp.h"

#include <cassert>
#include <cmath>
#include <glpk.h>
#include <stdexcept>

using namespace mist;

const char *mist::solveStatusName(SolveStatus s) {
  switch (s) {
  case SolveStatus::Optimal:
    return "optimal";
  case SolveStatus::Feasible:
    return "feasible";
  case SolveStatus::Infeasible:
    return "infeasible";
  case SolveStatus::Unbounded:
    return "unbounded";
  case SolveStatus::TimeLimit:
    return "time limit";
  case SolveStatus::Error:
    return "error";
  }
  return "?";
}

Milp::Milp() : lp(glp_create_prob()) {
  glp_term_out(GLP_OFF);
  glp_set_obj_dir(lp, GLP_MIN);
}

Milp::~Milp() { glp_delete_prob(lp); }

void Milp::setMinimize(bool minimize) { glp_set_obj_dir(lp, minimize ? GLP_MIN : GLP_MAX); }

int Milp::addVar(const std::string &name, Kind kind, double lo, double hi, double objective) {
  int j = glp_add_cols(lp, 1);
  cols = j;
  glp_set_col_name(lp, j, name.c_str());
  switch (kind) {
  case Kind::Continuous:
    glp_set_col_kind(lp, j, GLP_CV);
    break;
  case Kind::Binary:
    glp_set_col_kind(lp, j, GLP_BV);
    break;
  case Kind::Integer:
    glp_set_col_kind(lp, j, GLP_IV);
    break;
  }
  if (kind != Kind::Binary) {
    if (hi < lo || std::isinf(hi))
      glp_set_col_bnds(lp, j, std::isinf(lo) ? GLP_FR : GLP_LO, lo, 0);
    else if (hi == lo)
      glp_set_col_bnds(lp, j, GLP_FX, lo, hi);
    else
      glp_set_col_bnds(lp, j, GLP_DB, lo, hi);
  }
  glp_set_obj_coef(lp, j, std::isfinite(objective) ? objective : 0);
  return j;
}

int Milp::addRow(const std::string &name, const std::vector<std::pair<int, double>> &terms,
                 double lo, double hi) {
  std::vector<int> idx(1, 0);
  std::vector<double> val(1, 0);
  for (auto [j, c] : terms) {
    // GLPK aborts the process on out-of-range or repeated columns.
    if (j < 1 || j > cols)
      return -1;
    if (!std::isfinite(c))
      return -1;
    bool seen = false;
    for (size_t k = 1; k < idx.size() && !seen; ++k)
      if (idx[k] == j) {
        val[k] += c;
        seen = true;
      }
    if (!seen) {
      idx.push_back(j);
      val.push_back(c);
    }
  }
  int i = glp_add_rows(lp, 1);
  rows = i;
  glp_set_row_name(lp, i, name.c_str());
  bool hasLo = std::isfinite(lo), hasHi = std::isfinite(hi);
  int type = hasLo && hasHi ? (lo == hi ? GLP_FX : GLP_DB)
             : hasLo        ? GLP_LO
             : hasHi        ? GLP_UP
                            : GLP_FR;
  glp_set_row_bnds(lp, i, type, hasLo ? lo : 0, hasHi ? hi : 0);
  glp_set_mat_row(lp, i, static_cast<int>(idx.size()) - 1, idx.data(), val.data());
  return i;
}

SolveStatus Milp::solve(double timeLimitSeconds) {
  solvedMip = false;
  if (cols == 0)
    return SolveStatus::Error;
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  if (timeLimitSeconds > 0)
    parm.tm_lim = static_cast<int>(std::min(timeLimitSeconds * 1000, 2e9));
  int rc = glp_intopt(lp, &parm);
  if (rc == GLP_ENOPFS || rc == GLP_ENODFS)
    return SolveStatus::Infeasible;
  if (rc == GLP_ETMLIM) {
    solvedMip = glp_mip_status(lp) == GLP_FEAS;
    return solvedMip ? SolveStatus::TimeLimit : SolveStatus::TimeLimit;
  }
  if (rc != 0)
    return SolveStatus::Error;
  solvedMip = true;
  switch (glp_mip_status(lp)) {
  case GLP_OPT:
    return SolveStatus::Optimal;
  case GLP_FEAS:
    return SolveStatus::Feasible;
  case GLP_NOFEAS:
    solvedMip = false;
    return SolveStatus::Infeasible;
  case GLP_UNBND:
    solvedMip = false;
    return SolveStatus::Unbounded;
  default:
    solvedMip = false;
    return SolveStatus::Error;
  }
}

double Milp::objective() const { return solvedMip ? glp_mip_obj_val(lp) : NAN; }

double Milp::value(int var) const {
  if (!solvedMip || var < 1 || var > cols)
    return NAN;
  return glp_mip_col_val(lp, var);
}

bool Milp::writeLp(const std::string &path) const {
  return glp_write_lp(lp, nullptr, path.c_str()) == 0;
}
