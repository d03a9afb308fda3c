//===- Milp.h - A small RAII wrapper over GLPK's MILP solver --------------===//
/// \file
/// GLPK aborts the process on a bad row or column index, so every index is
/// checked here first; the call's outcome (did the solver run) and the
/// model's status (optimal, infeasible, ...) are separate, as HiGHS learned.
/// Terminal output is off; `writeLp` dumps the model in CPLEX LP format
/// (`--dump-milp`).
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

struct glp_prob;

namespace mist {

enum class SolveStatus { Optimal, Feasible, Infeasible, Unbounded, TimeLimit, Error };
const char *solveStatusName(SolveStatus s);

class Milp {
public:
  Milp();
  ~Milp();
  Milp(const Milp &) = delete;
  Milp &operator=(const Milp &) = delete;

  enum class Kind { Continuous, Binary, Integer };
  /// Adds a column with bounds [lo, hi] (hi = +inf when `hi < lo`); returns its index.
  int addVar(const std::string &name, Kind kind, double lo, double hi, double objective);
  /// Adds the row lo <= sum coef_i x_i <= hi; use -inf/+inf for one-sided rows.
  int addRow(const std::string &name, const std::vector<std::pair<int, double>> &terms, double lo,
             double hi);
  void setMinimize(bool minimize);
  int numVars() const { return cols; }

  /// Solves with branch and cut; `timeLimitSeconds` <= 0 means no limit.
  SolveStatus solve(double timeLimitSeconds = 0);
  double objective() const;
  double value(int var) const;
  /// Writes the model in CPLEX LP format; false on I/O failure.
  bool writeLp(const std::string &path) const;

private:
  glp_prob *lp;
  int cols = 0, rows = 0;
  bool solvedMip = false;
};

} // namespace mist
