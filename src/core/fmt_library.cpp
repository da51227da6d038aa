// fmt's compiled part inside fp8kit_core when fmt is used header-only (FP8KIT_FMT_HEADER_ONLY: the
// wheel's build, no libfmt.so at run time). fp8kit's libraries then compile against fmt's
// declarations only (-UFMT_HEADER_ONLY, CMakeLists.txt) and this unit defines what they call,
// once, from the packaged fmt's own implementation header, as libfmt.so does: header-only in every
// unit it cost ~3 s of CPU each. With libfmt.so (the default) it is empty. Tested by the wheel
// test (tests/wheel/run_wheel_test.sh: the module imports and formats fp8kit's errors).
#if defined(FP8KIT_FMT_LIBRARY)

#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
// The templates fmt/format.h declares `extern template` (or only declares) outside header-only mode.
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE

#endif
