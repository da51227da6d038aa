# The Python module fp8kit._fp8kit (python/): nanobind, linked against the component libraries
# of this build, so it costs one compile of the binding sources. FP8KIT_PYTHON_BINDINGS=AUTO
# builds it when the interpreter (FP8KIT_PYTHON, or the one scikit-build-core runs) has nanobind
# and its development headers; ON makes that an error instead. In the build tree the package is
# assembled under build/python/fp8kit (its .py files copied beside the module), which the tests
# put on PYTHONPATH (ctest: python_bindings). `pip install .` builds it through pyproject.toml.
set(FP8KIT_PYTHON_BINDINGS AUTO CACHE STRING "Build the Python module: AUTO (when nanobind is found), ON or OFF")
set_property(CACHE FP8KIT_PYTHON_BINDINGS PROPERTY STRINGS AUTO ON OFF)
if(FP8KIT_PYTHON_BINDINGS STREQUAL "OFF")
  return()
endif()
set(_fp8kit_python_required)
if(FP8KIT_PYTHON_BINDINGS STREQUAL "ON")
  set(_fp8kit_python_required REQUIRED)
endif()

if(FP8KIT_PYTHON AND NOT Python_EXECUTABLE)
  set(Python_EXECUTABLE ${FP8KIT_PYTHON})
endif()
find_package(Python 3.9 COMPONENTS Interpreter Development.Module ${_fp8kit_python_required})
if(Python_FOUND AND NOT nanobind_DIR)
  execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir OUTPUT_VARIABLE _nanobind_dir
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_nanobind_dir)
    set(nanobind_DIR ${_nanobind_dir} CACHE PATH "nanobind's CMake package (python -m nanobind --cmake_dir)" FORCE)
  endif()
endif()
if(Python_FOUND)
  find_package(nanobind CONFIG ${_fp8kit_python_required})
endif()
if(NOT Python_FOUND OR NOT nanobind_FOUND)
  message(STATUS "fp8kit: Python module OFF (needs Python development headers and nanobind)")
  return()
endif()
message(STATUS "fp8kit: Python module ON (${Python_EXECUTABLE}, nanobind ${nanobind_VERSION})")
add_subdirectory(${PROJECT_SOURCE_DIR}/python ${PROJECT_BINARY_DIR}/python)
