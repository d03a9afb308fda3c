//===- MegatronData.cpp - Megatron-LM's --data-path, --split and blending -===//
#include "runtime/data/MegatronData.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace mist::rt {

namespace {

/// numpy's sum of a float64 array (pairwise, unrolled by eight), so that
/// normalized weights round as Megatron-LM's do.
double numpySum(const double *a, int64_t n) {
  if (n < 8) {
    double sum = 0.;
    for (int64_t i = 0; i < n; ++i)
      sum += a[i];
    return sum;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j)
      r[j] = a[j];
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j)
        r[j] += a[i + j];
    double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i)
      sum += a[i];
    return sum;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return numpySum(a, half) + numpySum(a + half, n - half);
}

/// megatron.core.datasets.utils.normalize.
std::vector<double> normalize(std::vector<double> w) {
  const double sum = numpySum(w.data(), int64_t(w.size()));
  for (double &x : w)
    x /= sum;
  return w;
}

std::vector<std::string> words(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;)
    out.push_back(w);
  return out;
}

/// Python's float() of a whole word, or nullopt.
std::optional<double> number(const std::string &word) {
  char *end = nullptr;
  const double v = std::strtod(word.c_str(), &end);
  if (word.empty() || end != word.c_str() + word.size())
    return std::nullopt;
  return v;
}

/// The train split's sequences [first, end) of S: Python's round of the
/// share times S, halves to even as std::nearbyint rounds by default.
std::pair<int64_t, int64_t> trainSequences(double trainShare, int64_t sequences) {
  return {0, int64_t(std::nearbyint(trainShare * double(sequences)))};
}

} // namespace

std::optional<std::string> parseDataPath(const std::string &text,
                                         std::vector<std::string> &prefixes,
                                         std::optional<std::vector<double>> &weights) {
  const std::vector<std::string> w = words(text);
  prefixes.clear();
  weights.reset();
  if (w.empty())
    return std::string("--data-path names no dataset (give PREFIX, or weights and prefixes: "
                       "\"0.3 PREFIX1 0.7 PREFIX2\")");
  int numbers = 0;
  if (w.size() % 2 == 0)
    for (size_t i = 0; i < w.size(); i += 2)
      numbers += number(w[i]).has_value();
  if (numbers == 0) {
    prefixes = w;
    return std::nullopt;
  }
  if (size_t(numbers) != w.size() / 2)
    return "--data-path \"" + text +
           "\": every other word is a weight in a weighted blend, "
           "but " +
           std::to_string(w.size() / 2 - size_t(numbers)) + " of them are not numbers";
  weights.emplace();
  for (size_t i = 0; i < w.size(); i += 2) {
    const double v = *number(w[i]);
    if (!std::isfinite(v) || v <= 0)
      return "--data-path: the weight '" + w[i] + "' of " + w[i + 1] + " is not a positive number";
    weights->push_back(v);
    prefixes.push_back(w[i + 1]);
  }
  return std::nullopt;
}

std::optional<std::string> parseSplit(const std::string &text, double shares[3]) {
  std::vector<double> values;
  std::string current;
  auto flush = [&]() -> std::optional<std::string> {
    if (current.empty())
      return std::nullopt;
    const std::optional<double> v = number(current);
    if (!v || !std::isfinite(*v) || *v < 0)
      return "--split \"" + text + "\": '" + current + "' is not a share (a number >= 0)";
    values.push_back(*v);
    current.clear();
    return std::nullopt;
  };
  for (char c : text) {
    if (c == ',' || c == '/' || c == ' ') {
      if (auto bad = flush())
        return bad;
    } else if ((c >= '0' && c <= '9') || c == '.') {
      current += c;
    } else {
      return "--split \"" + text + "\": unexpected '" + std::string(1, c) +
             "' (write the train, valid and test shares, e.g. 969,30,1)";
    }
  }
  if (auto bad = flush())
    return bad;
  if (values.empty() || values.size() > 3)
    return "--split \"" + text + "\": " + std::to_string(values.size()) +
           " shares (give one to three: train, valid, test)";
  values.resize(3, 0.0);
  if (values[0] + values[1] + values[2] <= 0 || values[0] <= 0)
    return "--split \"" + text + "\": the train share must be above 0";
  const std::vector<double> n = normalize(values);
  for (int i = 0; i < 3; ++i)
    shares[i] = n[size_t(i)];
  return std::nullopt;
}

std::optional<MegatronData> MegatronData::open(const MegatronDataRequest &request,
                                               std::string &error) {
  std::vector<std::string> prefixes;
  std::optional<std::vector<double>> weights;
  if (auto bad = parseDataPath(request.dataPath, prefixes, weights)) {
    error = *bad;
    return std::nullopt;
  }
  double shares[3];
  if (auto bad = parseSplit(request.split, shares)) {
    error = *bad;
    return std::nullopt;
  }
  if (prefixes.size() >= 32767) {
    error = "--data-path: " + std::to_string(prefixes.size()) +
            " datasets (Megatron-LM blends at most 32766)";
    return std::nullopt;
  }
  if (request.samples < 1) {
    error = "Megatron-LM data: a run needs at least one sample";
    return std::nullopt;
  }

  MegatronData d;
  d.request = request;
  const bool blended = weights || prefixes.size() > 1;
  std::vector<double> normalized;
  if (weights)
    normalized = normalize(*weights);
  std::vector<int64_t> targets; // samples each dataset gives the blend
  for (size_t i = 0; i < prefixes.size(); ++i) {
    Part part;
    std::optional<IndexedDataset> dataset = IndexedDataset::open(prefixes[i], error);
    if (!dataset)
      return std::nullopt;
    part.dataset = std::make_unique<IndexedDataset>(std::move(*dataset));
    std::tie(part.firstSequence, part.endSequence) =
        trainSequences(shares[0], part.dataset->sequenceCount());
    GptSampleRequest r;
    r.firstSequence = part.firstSequence;
    r.endSequence = part.endSequence;
    r.seqLen = request.seqLen;
    r.seed = request.seed;
    if (!blended) {
      r.samples = request.samples;
    } else if (weights) {
      // Megatron-LM's target and, with its 0.5% surplus, what it builds.
      const double target = std::ceil(double(request.samples) * normalized[i]);
      targets.push_back(int64_t(target));
      r.samples = int64_t(std::ceil(target * (1.0 + 0.005)));
    } // else one epoch of each
    part.samples = GptSampleIndex::build(*part.dataset, r, error);
    if (!part.samples)
      return std::nullopt;
    d.parts.push_back(std::move(part));
  }

  if (!blended) {
    d.blendSize = d.parts[0].samples->size();
    return d;
  }
  std::vector<double> blendWeights;
  if (weights) {
    for (int64_t t : targets)
      d.blendSize += t;
    blendWeights = normalized;
  } else {
    int64_t all = 0;
    for (const Part &p : d.parts) {
      blendWeights.push_back(double(p.samples->size()));
      all += p.samples->size();
    }
    d.blendSize = std::min(request.samples, all);
  }
  // BlendedDataset normalizes what it is given (again, for weights).
  d.blendWeights = normalize(blendWeights);
  const size_t n = d.parts.size();
  std::vector<int64_t> taken(n, 0);
  d.datasetOf.resize(size_t(d.blendSize));
  d.sampleOf.resize(size_t(d.blendSize));
  for (int64_t j = 0; j < d.blendSize; ++j) {
    const double at = std::max(double(j), 1.0);
    size_t most = 0;
    double mostError = d.blendWeights[0] * at - double(taken[0]);
    for (size_t k = 1; k < n; ++k) {
      const double e = d.blendWeights[k] * at - double(taken[k]);
      if (e > mostError)
        mostError = e, most = k;
    }
    d.datasetOf[size_t(j)] = int16_t(most);
    d.sampleOf[size_t(j)] = taken[most]++;
  }
  for (size_t k = 0; k < n; ++k)
    if (taken[k] > d.parts[k].samples->size()) {
      error = d.parts[k].dataset->prefix() + ": the blend takes " + std::to_string(taken[k]) +
              " samples from it, its train split holds " +
              std::to_string(d.parts[k].samples->size());
      return std::nullopt;
    }
  return d;
}

std::optional<std::string> MegatronData::read(int64_t j, uint32_t *out) const {
  if (j < 0 || j >= blendSize)
    return "Megatron-LM data: training sample " + std::to_string(j) + " is past the " +
           std::to_string(blendSize) + " samples built for this run";
  if (datasetOf.empty())
    return parts[0].samples->read(j, out, request.vocabulary);
  const Part &p = parts[size_t(datasetOf[size_t(j)])];
  return p.samples->read(sampleOf[size_t(j)], out, request.vocabulary);
}

std::string MegatronData::summary() const {
  std::string s = "Megatron-LM data";
  char buffer[64];
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part &p = parts[i];
    s += i == 0 ? ": " : "; ";
    if (!blendWeights.empty()) {
      std::snprintf(buffer, sizeof buffer, "%.4g x ", blendWeights[i]);
      s += buffer;
    }
    s += p.dataset->prefix() + " (" + std::to_string(p.dataset->sequenceCount()) +
         " sequences of " + p.dataset->dtypeName() + ", train [" + std::to_string(p.firstSequence) +
         ", " + std::to_string(p.endSequence) + "), " + std::to_string(p.samples->epochs()) +
         " epoch" + (p.samples->epochs() > 1 ? "s" : "") + ")";
  }
  return s + "; split " + request.split + ", seed " + std::to_string(request.seed) + ", " +
         std::to_string(blendSize) + " samples of " + std::to_string(request.seqLen + 1) +
         " tokens";
}

std::string MegatronData::fingerprint() const {
  std::string s = "megatron split " + request.split + " seed " + std::to_string(request.seed) +
                  " samples " + std::to_string(request.samples) + " seq " +
                  std::to_string(request.seqLen);
  char buffer[64];
  for (size_t i = 0; i < parts.size(); ++i) {
    std::snprintf(buffer, sizeof buffer, " %.6g:%016llx",
                  blendWeights.empty() ? 1.0 : blendWeights[i],
                  (unsigned long long)parts[i].dataset->fingerprint());
    s += buffer;
  }
  return s;
}

} // namespace mist::rt
