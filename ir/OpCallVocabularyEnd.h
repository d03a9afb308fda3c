//===- OpCallVocabularyEnd.h - Undefine ir/OpCalls.def's vocabulary -------===//
/// \file
/// Included after ir/OpCalls.def by each reader that defined its vocabulary,
/// so the short names (IN, N, ...) never leak past the function that reads
/// the table. Deliberately without an include guard.
//===----------------------------------------------------------------------===//
#undef O
#undef R
#undef IN
#undef RES
#undef IDS
#undef OPT_IN
#undef OPT_RES
#undef IN_PICK
#undef ROW_PARALLEL_BIAS
#undef DIM
#undef LAST
#undef ELEMS
#undef ROWS
#undef SIZE_ATTR
#undef N
#undef TP_OFFSET
#undef FIRST_TOKEN
#undef F32
#undef FLAG
#undef NAMED_FLAG
#undef ATT_Q
#undef ATT_K
#undef ATT_V
#undef ATT_DQ
#undef ATT_DK
#undef ATT_DV
#undef ATT_OUT
#undef ATT_LSE
#undef ATT_Q_STRIDE
#undef ATT_KV_STRIDE
#undef ATT_SHAPE
