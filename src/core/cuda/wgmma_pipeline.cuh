// The K loop of a consumer warpgroup that promotes every K tile out of the tensor cores (the sm_90
// GEMM kernels' scheme, DeepGEMM's reason: the tensor cores keep fewer bits than f32 while they
// add FP8 products): two f32 fragments take turns, so that the tensor cores multiply tile kt while
// tile kt - 1 is promoted (wgmma.wait_group 1).
#pragma once

#include "core/cuda/wgmma.cuh"

namespace fp8kit::cuda {

// Runs tiles 0 .. num_k_tiles - 1 (at least one):
//   scales_of(kt)             what retire needs for tile kt (block scales), read before the tile
//                             is issued, so that its latency passes while the tensor cores work;
//   issue(part, kt)           waits for tile kt's operands and queues its product into `part`
//                             (one wgmma commit group);
//   retire(part, kt, scales)  tile kt's product is complete: promote it and free its stage.
// Tiles go in pairs, so that each fragment has one fixed role per step (ptxas then keeps the
// wgmmas asynchronous).
template <int kFrag, typename ScalesOf, typename Issue, typename Retire>
__device__ __forceinline__ void promoted_k_loop(int num_k_tiles, float (&part0)[kFrag], float (&part1)[kFrag],
                                                ScalesOf scales_of, Issue issue, Retire retire) {
  auto s0 = scales_of(0);
  decltype(s0) s1;
  issue(part0, 0);
  int kt = 1;
  for (; kt + 1 < num_k_tiles; kt += 2) {
    s1 = scales_of(kt);
    issue(part1, kt);
    wgmma_wait<1>();  // tile kt - 1 is done
    retire(part0, kt - 1, s0);
    s0 = scales_of(kt + 1);
    issue(part0, kt + 1);
    wgmma_wait<1>();  // tile kt is done
    retire(part1, kt, s1);
  }
  if (kt < num_k_tiles) {  // an even tile count: one more, into part1
    s1 = scales_of(kt);
    issue(part1, kt);
    wgmma_wait<1>();
    retire(part0, kt - 1, s0);
    wgmma_wait<0>();
    retire(part1, kt, s1);
  } else {
    wgmma_wait<0>();
    retire(part0, kt - 1, s0);
  }
}

}  // namespace fp8kit::cuda
