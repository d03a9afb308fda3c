//===- CostClosedFormTest.cpp - Per-layer costs vs textbook formulas ------===//
/// The cost model's per-layer sums, symbolic in b, s, h, a and tp, must be
/// exactly the closed forms:
///  - GPT forward FLOPs 24*b*s*h^2/tp + 4*b*s^2*h/tp (Narayanan et al.);
///  - Megatron's activation bytes s*b*h*(10 + 24/tp + 5*a*s/(h*tp)) for the
///    classic setting (dropout, attention that keeps its score matrix), plus
///    one documented difference: LayerNorm keeps its per-token mean and
///    reciprocal std in fp32 (8 bytes per token per norm, 16*b*s per layer),
///    which the formula leaves out;
///  - the flash-attention and grouped-query (Llama) equivalents.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

using namespace mist;
using namespace mist::test;

namespace {

Expr layerEntry(const Module &m, const char *key) {
  EXPECT_TRUE(m.layer.summary.has_value());
  auto e = m.layer.summary ? m.layer.summary->get(key) : std::nullopt;
  EXPECT_TRUE(e.has_value()) << key;
  return e ? *e : Expr(0);
}

#define EXPECT_EXPR_EQ(m, actual, expected)                                                        \
  EXPECT_TRUE(exprEqual(actual, expected)) << "got      " << printExpr(actual, (m).symbols)        \
                                           << "\nexpected " << printExpr(expected, (m).symbols)

const char *gptSource(bool megatron) {
  return megatron ? "import \"gpt\"\n"
                    "model g = gpt(vocab = 50304, hidden = 2048, layers = 24, heads = 16,\n"
                    "              dropout = 0.1, flash = false)\n"
                    "train { seq_len = 2048 }\n"
                  : "import \"gpt\"\n"
                    "model g = gpt(vocab = 50304, hidden = 2048, layers = 24, heads = 16)\n"
                    "train { seq_len = 2048 }\n";
}

TEST(CostClosedForm, GptForwardFlops) {
  for (bool megatron : {false, true}) {
    auto c = compile(gptSource(megatron));
    ASSERT_TRUE(c->module) << c->diagText;
    const Module &m = *c->module;
    Expr b = sym(m, "b"), s = sym(m, "s"), h = sym(m, "hidden"), tp = sym(m, "tp");
    EXPECT_EXPR_EQ(m, layerEntry(m, "fwd_flops"), 24 * b * s * h * h / tp + 4 * b * s * s * h / tp);
  }
}

TEST(CostClosedForm, GptBackwardFlops) {
  // Plain attention: backward is exactly twice the forward. Flash attention
  // recomputes the scores: 5 instead of 4 attention matmuls.
  auto classic = compile(gptSource(true));
  ASSERT_TRUE(classic->module) << classic->diagText;
  const Module &m = *classic->module;
  EXPECT_EXPR_EQ(m, layerEntry(m, "bwd_flops"), 2 * layerEntry(m, "fwd_flops"));

  auto flash = compile(gptSource(false));
  ASSERT_TRUE(flash->module) << flash->diagText;
  const Module &f = *flash->module;
  Expr b = sym(f, "b"), s = sym(f, "s"), h = sym(f, "hidden"), tp = sym(f, "tp");
  EXPECT_EXPR_EQ(f, layerEntry(f, "bwd_flops"), 48 * b * s * h * h / tp + 10 * b * s * s * h / tp);
}

TEST(CostClosedForm, GptActivationsMatchMegatronPlusNormStatistics) {
  auto c = compile(gptSource(true));
  ASSERT_TRUE(c->module) << c->diagText;
  const Module &m = *c->module;
  Expr b = sym(m, "b"), s = sym(m, "s"), h = sym(m, "hidden"), a = sym(m, "heads"),
       tp = sym(m, "tp");
  Expr megatron = s * b * h * (10 + 24 / tp + 5 * a * s / (h * tp));
  Expr normStats = 2 * (2 * 4) * b * s; // two LayerNorms x (mean, rstd) x fp32
  EXPECT_EXPR_EQ(m, layerEntry(m, "saved"), megatron + normStats);
}

TEST(CostClosedForm, GptFlashActivations) {
  // No dropout masks (-2), no score matrices (-5as/h); flash keeps the
  // attention output (counted with the out-projection input) and a fp32
  // log-sum-exp per head and token.
  auto c = compile(gptSource(false));
  ASSERT_TRUE(c->module) << c->diagText;
  const Module &m = *c->module;
  Expr b = sym(m, "b"), s = sym(m, "s"), h = sym(m, "hidden"), a = sym(m, "heads"),
       tp = sym(m, "tp");
  EXPECT_EXPR_EQ(m, layerEntry(m, "saved"),
                 s * b * h * (8 + 24 / tp) + 4 * b * a * s / tp + 16 * b * s);
}

TEST(CostClosedForm, GptTensorParallelTraffic) {
  // One all-reduce of the [b, s, h] bf16 activations after attention and
  // after the MLP in forward, and of the input gradients in backward.
  auto c = compile(gptSource(false));
  ASSERT_TRUE(c->module) << c->diagText;
  const Module &m = *c->module;
  Expr b = sym(m, "b"), s = sym(m, "s"), h = sym(m, "hidden");
  EXPECT_EXPR_EQ(m, layerEntry(m, "fwd_comm"), 2 * (2 * b * s * h));
  EXPECT_EXPR_EQ(m, layerEntry(m, "bwd_comm"), 2 * (2 * b * s * h));
}

TEST(CostClosedForm, LlamaGroupedQueryAttention) {
  auto c = compile("import \"llama\"\n"
                   "model l = llama(vocab = 32000, hidden = 8192, layers = 80, heads = 64,\n"
                   "                kv_heads = 8, ffn = 28672)\n"
                   "train { seq_len = 4096 }\n");
  ASSERT_TRUE(c->module) << c->diagText;
  const Module &m = *c->module;
  Expr b = sym(m, "b"), s = sym(m, "s"), h = sym(m, "hidden"), a = sym(m, "heads"),
       kv = sym(m, "kv_heads"), f = sym(m, "ffn"), tp = sym(m, "tp");
  Expr kvWidth = kv * h / a;                  // key/value projection width
  Expr fwd = (2 * b * s * h * h               // q
              + 2 * (2 * b * s * h * kvWidth) // k, v
              + 2 * b * s * h * h             // o
              + 3 * (2 * b * s * h * f)       // gate, up, down
              + 4 * b * s * s * h) /          // scores and context
             tp;
  EXPECT_EXPR_EQ(m, layerEntry(m, "fwd_flops"), fwd);
  // Saved: norm inputs (2bsh each) and rstd (4bs each), the shared tp copies
  // feeding q/k/v and gate/up (2bsh each), rotated q and k, v, the attention
  // output, log-sum-exp, and the SwiGLU intermediates.
  Expr saved = 8 * b * s * h + 8 * b * s +
               (2 * b * s * h + 4 * b * s * kvWidth + 2 * b * s * h + 4 * b * a * s) / tp +
               (2 * b * s * f + 4 * b * s * f + 2 * b * s * f) / tp;
  EXPECT_EXPR_EQ(m, layerEntry(m, "saved"), saved);
}

TEST(CostClosedForm, ShardedParametersDivideByTp) {
  auto c = compile(gptSource(false));
  ASSERT_TRUE(c->module) << c->diagText;
  const Module &m = *c->module;
  Expr h = sym(m, "hidden"), tp = sym(m, "tp");
  // Column/row-sharded matrices and column biases are split; LayerNorms and
  // row-parallel biases are replicated.
  Expr expected = 12 * h * h / tp + 7 * h / tp + 6 * h;
  EXPECT_EXPR_EQ(m, layerEntry(m, "params"), expected);
}

} // namespace

namespace {

/// The loss's forward and backward op in the post region.
std::pair<const Op *, const Op *> lossOps(const Module &m) {
  const Op *fwd = nullptr, *bwd = nullptr;
  for (auto &op : m.post.fwd.ops)
    if (op->kind == OpKind::CrossEntropy)
      fwd = op.get();
  if (m.post.bwd)
    for (auto &op : m.post.bwd->ops)
      if (op->kind == OpKind::CrossEntropyGrad)
        bwd = op.get();
  return {fwd, bwd};
}

TEST(CostClosedForm, UnfusedLossMovesMegatronsPasses) {
  // Fused: the forward reads the logits, the backward reads them again and
  // writes their gradient. Unfused (Megatron-LM's vocab-parallel sequence):
  // the forward writes the fp32 softmax (the upcast) and makes five more
  // fp32 reads and three more writes over it; the backward reads that
  // softmax instead of the logits, plus one more read and write (the scaling
  // in place, then the cast back). bf16 logits, so E elements are 2E bytes.
  const char *fused = "import \"gpt\"\n"
                      "model g = gpt(vocab = 50304, hidden = 2048, layers = 2, heads = 16)\n"
                      "train { seq_len = 2048\n dtype = bf16 }\n";
  const char *unfused = "import \"gpt\"\n"
                        "model g = gpt(vocab = 50304, hidden = 2048, layers = 2, heads = 16,\n"
                        "              fused_loss = false)\n"
                        "train { seq_len = 2048\n dtype = bf16 }\n";
  auto f = compile(fused), u = compile(unfused);
  ASSERT_TRUE(f->module) << f->diagText;
  ASSERT_TRUE(u->module) << u->diagText;
  auto [ffwd, fbwd] = lossOps(*f->module);
  auto [ufwd, ubwd] = lossOps(*u->module);
  ASSERT_TRUE(ffwd && fbwd && ufwd && ubwd);
  ASSERT_TRUE(ffwd->cost && fbwd->cost && ufwd->cost && ubwd->cost);
  const Module &m = *u->module;
  const Value *logits = ufwd->operands[0];
  ASSERT_EQ(logits->type.dtype, DType::BF16);
  Expr e = logits->type.numElements();
  Expr bs = ufwd->operands[1]->type.numElements(); // one target per token
  // Each module has symbols of its own: the fused one's sizes.
  const Module &fm = *f->module;
  Expr fe = ffwd->operands[0]->type.numElements(), fbs = ffwd->operands[1]->type.numElements();
  // Fused: logits + targets in, loss + stats (2 fp32 per token) out.
  EXPECT_EXPR_EQ(fm, ffwd->cost->read, 2 * fe + 4 * fbs);
  EXPECT_EXPR_EQ(fm, ffwd->cost->write, 4 + 8 * fbs);
  // Unfused: the same, plus the fp32 softmax written and 5 reads, 3 writes.
  EXPECT_EXPR_EQ(m, ufwd->cost->read, 2 * e + 4 * bs + 5 * 4 * e);
  EXPECT_EXPR_EQ(m, ufwd->cost->write, 4 + 8 * bs + 4 * e + 3 * 4 * e);
  // Backward: dy, targets, stats and the logits (fused) or softmax (unfused)
  // in, the bf16 logits' gradient out.
  EXPECT_EXPR_EQ(fm, fbwd->cost->read, 4 + 4 * fbs + 8 * fbs + 2 * fe);
  EXPECT_EXPR_EQ(fm, fbwd->cost->write, 2 * fe);
  EXPECT_EXPR_EQ(m, ubwd->cost->read, 4 + 4 * bs + 8 * bs + 4 * e + 4 * e);
  EXPECT_EXPR_EQ(m, ubwd->cost->write, 2 * e + 4 * e);
  // What the backward keeps: the softmax (fp32) in place of the logits.
  EXPECT_FALSE(llvm::is_contained(ubwd->operands, logits));
  EXPECT_TRUE(llvm::is_contained(ubwd->operands, ufwd->results[2].get()));
  EXPECT_EQ(ufwd->results[2]->type.dtype, DType::F32);
}

} // namespace
