# fp8kit's version header: include/fp8kit/version.h, generated from the project version into the
# build tree (FP8KIT_VERSION_MAJOR/MINOR/PATCH/STRING; fp8kit::version_string() in
# src/core/version.cpp), public through fp8kit_core and installed with the other public headers.
# Tests: Cli.VersionFlag (fp8kit --version), tests/install (the consumer compares the two).
set(FP8KIT_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/generated/include)
configure_file(${CMAKE_CURRENT_LIST_DIR}/fp8kit_version.h.in ${FP8KIT_GENERATED_INCLUDE_DIR}/fp8kit/version.h @ONLY)
target_include_directories(fp8kit_core PUBLIC $<BUILD_INTERFACE:${FP8KIT_GENERATED_INCLUDE_DIR}>)
