// Public entry of embedding (include/fp8kit/ops/embedding.h): validates once (the ids on the
// host), fills EmbeddingArgs and routes by device (CPU: the reference). Tested by
// tests/cpu/test_embedding.cpp.
#include "fp8kit/ops/embedding.h"

#include "ops/context_checks.h"
#include "ops/embedding/embedding_ref.h"
#include "ops/op_checks.h"

namespace fp8kit::ops {

using namespace detail;

Tensor embedding(const ForwardContext& ctx, const Tensor& ids, const Tensor& table, const EmbeddingOptions& options) {
  constexpr std::string_view kOp = "embedding";
  require_defined(kOp, ids, "ids");
  require_defined(kOp, table, "table");
  for (const auto& [t, name] : {std::pair{&ids, "ids"}, std::pair{&table, "table"}, std::pair{&options.out, "out"}}) {
    require_context_device(kOp, ctx, *t, name);
  }
  FP8KIT_CHECK_ARG((ids.dtype() == DType::kI32 || ids.dtype() == DType::kI64) && ids.is_contiguous(),
                   "{}: `ids` must be a contiguous i32 or i64 tensor, got {}", kOp, ids.description());
  require_dim(kOp, table, "table", 2);
  require_float_input(kOp, table, "table");
  FP8KIT_CHECK_ARG(table.stride(1) == 1 || table.size(1) <= 1,
                   "{}: the last dimension of `table` must be contiguous, got strides {}", kOp,
                   shape_to_string(table.strides()));
  const int64_t num_rows = table.size(0), hidden = table.size(1);
  FP8KIT_CHECK_ARG(options.vocab_start >= 0, "{}: `vocab_start` must be non-negative, got {}", kOp,
                   options.vocab_start);
  const int64_t vocab_size = options.vocab_size.value_or(options.vocab_start + num_rows);
  FP8KIT_CHECK_ARG(vocab_size >= 0, "{}: `vocab_size` must be non-negative, got {}", kOp, vocab_size);
  Shape out_shape = ids.shape();
  out_shape.push_back(hidden);
  if (options.out.defined()) require_output(kOp, options.out, "out", table.dtype(), out_shape, table.device());
  require_reference_backend(kOp, ctx.device());

  const int64_t n = ids.numel();
  for (int64_t t = 0; t < n; ++t) {
    const int64_t id = ids.dtype() == DType::kI32 ? int64_t(ids.data<int32_t>()[t]) : ids.data<int64_t>()[t];
    FP8KIT_CHECK_ARG(id >= 0 && id < vocab_size, "{}: ids[{}] = {} is outside the vocabulary [0, {})", kOp, t, id,
                     vocab_size);
  }
  Tensor out = options.out.defined() ? options.out : Tensor::empty(out_shape, table.dtype(), table.device());
  EmbeddingArgs args;
  args.num_tokens = n;
  args.hidden = hidden;
  args.ids = ids.data_ptr();
  args.ids_dtype = ids.dtype();
  args.table = table.data_ptr();
  args.num_rows = num_rows;
  args.table_row_stride = table.stride(0);
  args.element_size = table.element_size();
  args.vocab_start = options.vocab_start;
  args.out = out.data_ptr();
  embedding_ref(args, work_parts(ctx));
  return out;
}

}  // namespace fp8kit::ops
