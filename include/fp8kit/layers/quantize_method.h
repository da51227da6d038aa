// QuantizeMethod (the spec's QuantizeMethodBase) and the methods an Fp8Config hands out.
#pragma once

#include <string>

namespace fp8kit {

class Fp8Config;

class QuantizeMethod {
 public:
  virtual ~QuantizeMethod() = default;
  // The spec's class name: "UnquantizedLinearMethod", "Fp8LinearMethod", "Fp8MoEMethod",
  // "Fp8KVCacheMethod".
  virtual std::string name() const = 0;
};

// Linear layers that stay in the model dtype (skipped by ignored_layers).
class UnquantizedLinearMethod : public QuantizeMethod {
 public:
  std::string name() const override { return "UnquantizedLinearMethod"; }
};

// The FP8 methods keep a reference to the config that made them (it must outlive them).
class Fp8LinearMethod : public QuantizeMethod {
 public:
  explicit Fp8LinearMethod(const Fp8Config& config) : config_(config) {}
  std::string name() const override { return "Fp8LinearMethod"; }
  const Fp8Config& quant_config() const { return config_; }

 private:
  const Fp8Config& config_;
};

class Fp8MoEMethod : public QuantizeMethod {
 public:
  explicit Fp8MoEMethod(const Fp8Config& config) : config_(config) {}
  std::string name() const override { return "Fp8MoEMethod"; }
  const Fp8Config& quant_config() const { return config_; }

 private:
  const Fp8Config& config_;
};

class Fp8KVCacheMethod : public QuantizeMethod {
 public:
  explicit Fp8KVCacheMethod(const Fp8Config& config) : config_(config) {}
  std::string name() const override { return "Fp8KVCacheMethod"; }
  const Fp8Config& quant_config() const { return config_; }

 private:
  const Fp8Config& config_;
};

}  // namespace fp8kit
