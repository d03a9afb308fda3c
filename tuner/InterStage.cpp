//===- InterStage.cpp - The MILP that splits layers and picks strategies --===//
#include "tuner/InterStage.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace mist;

double mist::interStageObjective(const std::vector<double> &t, const std::vector<double> &d, int G,
                                 bool imbalanceAware) {
  double sum = 0, maxT = 0, maxD = 0, before = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    sum += t[i];
    maxT = std::max(maxT, t[i]);
    if (imbalanceAware)
      maxD = std::max(maxD, d[i] - before);
    before += t[i];
  }
  return sum + (G - 1) * maxT + maxD;
}

std::optional<InterStageChoice> mist::solveInterStage(const StageTable &table,
                                                      const InterStageOptions &opts,
                                                      SolveStatus *statusOut) {
  const int S = static_cast<int>(table.size());
  auto setStatus = [&](SolveStatus s) {
    if (statusOut)
      *statusOut = s;
  };
  // A cheap bound first: every stage at its fastest option for any layer
  // count, the slowest of those for the (G-1) steady micro-batches.
  double lower = 0, maxMin = 0;
  for (const auto &byLayers : table) {
    double best = INFINITY;
    for (auto &[l, cands] : byLayers)
      for (const StageCandidate &c : cands)
        best = std::min(best, c.t);
    if (!std::isfinite(best)) {
      setStatus(SolveStatus::Infeasible);
      return std::nullopt;
    }
    lower += best;
    maxMin = std::max(maxMin, best);
  }
  lower += (opts.gradAccum - 1) * maxMin;
  if (lower >= opts.upperBound) {
    setStatus(SolveStatus::Infeasible);
    return std::nullopt;
  }

  Milp milp;
  const double G = opts.gradAccum;
  int maxT = milp.addVar("Max_t", Milp::Kind::Continuous, 0, INFINITY, G - 1);
  int maxD =
      opts.imbalanceAware ? milp.addVar("Max_d", Milp::Kind::Continuous, 0, INFINITY, 1) : -1;
  std::vector<int> T(S);
  struct ZVar {
    int var, stage, layers;
    size_t k;
  };
  std::vector<ZVar> zs;
  std::vector<std::vector<std::pair<int, int>>> xs(S); // (var, layers)
  for (int i = 0; i < S; ++i)
    T[i] = milp.addVar("T_" + std::to_string(i), Milp::Kind::Continuous, 0, INFINITY, 1);
  std::vector<std::pair<int, double>> layerSum;
  for (int i = 0; i < S; ++i) {
    std::vector<std::pair<int, double>> oneCount, tDef{{T[i], -1}}, dDef;
    for (auto &[l, cands] : table[i]) {
      if (cands.empty())
        continue;
      int x = milp.addVar("x_" + std::to_string(i) + "_" + std::to_string(l), Milp::Kind::Binary, 0,
                          1, 0);
      xs[i].push_back({x, l});
      oneCount.push_back({x, 1});
      layerSum.push_back({x, double(l)});
      std::vector<std::pair<int, double>> pick{{x, -1}};
      for (size_t k = 0; k < cands.size(); ++k) {
        int z = milp.addVar("z_" + std::to_string(i) + "_" + std::to_string(l) + "_" +
                                std::to_string(k),
                            Milp::Kind::Binary, 0, 1, 0);
        zs.push_back({z, i, l, k});
        pick.push_back({z, 1});
        tDef.push_back({z, cands[k].t});
        dDef.push_back({z, cands[k].d});
      }
      milp.addRow("pick_" + std::to_string(i) + "_" + std::to_string(l), pick, 0, 0);
    }
    if (oneCount.empty()) {
      setStatus(SolveStatus::Infeasible);
      return std::nullopt;
    }
    milp.addRow("one_count_" + std::to_string(i), oneCount, 1, 1);
    milp.addRow("T_def_" + std::to_string(i), tDef, 0, 0);
    milp.addRow("max_t_" + std::to_string(i), {{maxT, 1}, {T[i], -1}}, 0, INFINITY);
    if (opts.imbalanceAware) {
      // Max_d >= D_i - sum_{j<i} T_j, with D_i = sum d z.
      std::vector<std::pair<int, double>> row{{maxD, 1}};
      for (auto [z, coef] : dDef)
        row.push_back({z, -coef});
      for (int j = 0; j < i; ++j)
        row.push_back({T[j], 1});
      milp.addRow("max_d_" + std::to_string(i), row, 0, INFINITY);
    }
  }
  milp.addRow("layers", layerSum, opts.totalLayers, opts.totalLayers);
  if (opts.totalGpus > 0) {
    std::vector<std::vector<std::pair<int, double>>> gpusOf(S);
    for (const ZVar &z : zs)
      gpusOf[z.stage].push_back({z.var, double(table[z.stage].at(z.layers)[z.k].gpus)});
    std::vector<std::pair<int, double>> all;
    for (int i = 0; i < S; ++i) {
      all.insert(all.end(), gpusOf[i].begin(), gpusOf[i].end());
      if (i + 1 < S) { // gpus_i - gpus_{i+1} >= 0
        std::vector<std::pair<int, double>> row = gpusOf[i];
        for (auto [z, g] : gpusOf[i + 1])
          row.push_back({z, -g});
        milp.addRow("gpus_order_" + std::to_string(i), row, 0, INFINITY);
      }
    }
    milp.addRow("gpus", all, opts.totalGpus, opts.totalGpus);
  }
  if (std::isfinite(opts.upperBound)) {
    std::vector<std::pair<int, double>> obj{{maxT, G - 1}};
    if (maxD >= 0)
      obj.push_back({maxD, 1});
    for (int i = 0; i < S; ++i)
      obj.push_back({T[i], 1});
    milp.addRow("best_so_far", obj, -INFINITY, opts.upperBound);
  }
  if (!opts.dumpPath.empty())
    milp.writeLp(opts.dumpPath);
  SolveStatus st = milp.solve(opts.timeLimitSeconds);
  setStatus(st);
  if (st != SolveStatus::Optimal && st != SolveStatus::Feasible &&
      !(st == SolveStatus::TimeLimit && std::isfinite(milp.objective())))
    return std::nullopt;
  InterStageChoice choice;
  choice.layers.assign(S, 0);
  choice.configs.assign(S, 0);
  std::vector<double> t(S), d(S);
  for (const ZVar &z : zs)
    if (milp.value(z.var) > 0.5) {
      const StageCandidate &c = table[z.stage].at(z.layers)[z.k];
      choice.layers[z.stage] = z.layers;
      choice.configs[z.stage] = c.config;
      t[z.stage] = c.t;
      d[z.stage] = c.d;
    }
  // Report the objective recomputed from the choice, not the solver's
  // floating-point sum.
  choice.objective = interStageObjective(t, d, opts.gradAccum, opts.imbalanceAware);
  return choice;
}

std::optional<InterStageChoice> mist::bruteForceInterStage(const StageTable &table,
                                                           const InterStageOptions &opts) {
  const int S = static_cast<int>(table.size());
  std::optional<InterStageChoice> best;
  std::vector<int> layers(S);
  std::vector<size_t> configs(S);
  std::vector<double> t(S), d(S);
  std::function<void(int, int, int, int)> rec = [&](int i, int used, int gpus, int prevGpus) {
    if (i == S) {
      if (used != opts.totalLayers || (opts.totalGpus > 0 && gpus != opts.totalGpus))
        return;
      double obj = interStageObjective(t, d, opts.gradAccum, opts.imbalanceAware);
      if (!best || obj < best->objective - 1e-12)
        best = InterStageChoice{layers, configs, obj};
      return;
    }
    for (auto &[l, cands] : table[i])
      for (const StageCandidate &c : cands) {
        if (opts.totalGpus > 0 && i > 0 && c.gpus > prevGpus)
          continue;
        layers[i] = l;
        configs[i] = c.config;
        t[i] = c.t;
        d[i] = c.d;
        rec(i + 1, used + l, gpus + c.gpus, c.gpus);
      }
  };
  rec(0, 0, 0, 0);
  return best;
}
