# Included by the top-level CMakeLists.txt when LOOM_FUZZ is on, before OpenMP is found and
# before any target exists: the whole build (the loom library included) gets libFuzzer's
# coverage instrumentation plus ASan and UBSan; only the harnesses link libFuzzer itself.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "LOOM_FUZZ needs clang (configure with CC=clang CXX=clang++)")
endif()

# oneDNN links gcc's libgomp. clang's plain -fopenmp would add LLVM's libomp, and two OpenMP
# runtimes in one process fight over threads; -fopenmp=libgomp makes clang emit GOMP_* calls
# and link libgomp only.
execute_process(COMMAND gcc -print-file-name=libgomp.so OUTPUT_VARIABLE _loom_gomp
                OUTPUT_STRIP_TRAILING_WHITESPACE)
set(OpenMP_CXX_FLAGS "-fopenmp=libgomp" CACHE STRING "OpenMP flags (fuzz build: libgomp)" FORCE)
set(OpenMP_CXX_LIB_NAMES "gomp" CACHE STRING "OpenMP libraries (fuzz build)" FORCE)
set(OpenMP_gomp_LIBRARY "${_loom_gomp}" CACHE FILEPATH "gcc's libgomp" FORCE)

# Every UBSan report is fatal, so the fuzzer stops on it like on an ASan report.
set(LOOM_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=all)
add_compile_options(-fsanitize=fuzzer-no-link ${LOOM_FUZZ_SANITIZERS} -fno-omit-frame-pointer -g)
add_link_options(${LOOM_FUZZ_SANITIZERS})
