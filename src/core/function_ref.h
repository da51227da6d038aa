// FunctionRef<R(Args...)>: a non-owning reference to a callable for the length of a call (what
// std::function does for parallel_for, without the heap allocation a capture of more than two
// pointers costs, or a copy). Built from a lambda or any callable; the callable must outlive the
// reference: pass it down, never store it past the call. Tested in tests/cpu/test_parallel.cpp.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace fp8kit {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
                                              std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): takes lambdas as std::function does
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_(&call<std::remove_reference_t<F>>) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  template <class F>
  static R call(void* object, Args... args) {
    return (*static_cast<F*>(object))(std::forward<Args>(args)...);
  }

  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace fp8kit
