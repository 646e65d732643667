# SPDX-License-Identifier: Apache-2.0
# The test fuzz.determinism (tests/fuzz/CMakeLists.txt): each fuzz.<name> runs the same inputs
# every time, so ctest cannot turn red by chance (libFuzzer's -seed=1 -runs=1500 alone gives
# five different input sets in five runs, because coverage depends on addresses).
#
#   cmake -DCTEST=<ctest> -DBUILD_DIR=<build> -DFUZZ_DIR=<build>/tests/fuzz -DNAMES=a,b -P this
#
# For each name the fingerprint of a run of fuzz.<name> is the list of inputs it ran
# (FUZZ_DIR/<name>/inputs.txt) and the hash of every file it left in FUZZ_DIR/<name>/corpus (the
# inputs it kept). The first is that of the run ctest just made (this test requires the
# fuzz.<name> tests as a fixture), or of a run made here if there is none; the second is of a run
# made here with address space layout randomisation off (setarch -R) where it can be turned off,
# so that the libraries lie at other addresses than in the first. They must be equal. A run made
# here is the test's own command, environment and folder as ctest has them (--show-only), run
# directly rather than by a nested ctest, which would write over this ctest's logs, and without
# the libFuzzer pass, which adds nothing to the fingerprint.
cmake_minimum_required(VERSION 3.25)

function(fingerprint name out)
  set(work ${FUZZ_DIR}/${name})
  set(text "inputs run:\n")
  if(EXISTS ${work}/inputs.txt)
    file(READ ${work}/inputs.txt listed)
    string(APPEND text "${listed}")
  else()
    string(APPEND text "(not listed)\n")
  endif()
  string(APPEND text "inputs kept in corpus/:\n")
  file(GLOB kept LIST_DIRECTORIES false RELATIVE ${work}/corpus ${work}/corpus/*)
  list(SORT kept)
  foreach(f IN LISTS kept)
    file(SHA256 ${work}/corpus/${f} h)
    string(APPEND text "${h} ${f}\n")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Runs fuzz.<name> as ctest would, prefixed by `prefix` (a command list, or nothing).
function(run_again name prefix)
  execute_process(COMMAND ${CTEST} --test-dir ${BUILD_DIR} --show-only=json-v1
                          -R "^fuzz\\.${name}$"
                  OUTPUT_VARIABLE json RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ctest --show-only failed for fuzz.${name}")
  endif()
  string(JSON count LENGTH "${json}" tests)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "fuzz.${name}: ${count} tests match, expected 1")
  endif()
  string(JSON args GET "${json}" tests 0 command)
  string(JSON n LENGTH "${args}")
  set(command "")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON a GET "${args}" ${i})
    list(APPEND command "${a}")
  endforeach()
  set(env "")
  set(dir ${BUILD_DIR})
  string(JSON nprops LENGTH "${json}" tests 0 properties)
  math(EXPR last "${nprops} - 1")
  foreach(i RANGE ${last})
    string(JSON pname GET "${json}" tests 0 properties ${i} name)
    if(pname STREQUAL "ENVIRONMENT")
      string(JSON values GET "${json}" tests 0 properties ${i} value)
      string(JSON nv LENGTH "${values}")
      math(EXPR lastv "${nv} - 1")
      foreach(j RANGE ${lastv})
        string(JSON v GET "${values}" ${j})
        list(APPEND env "${v}")
      endforeach()
    elseif(pname STREQUAL "WORKING_DIRECTORY")
      string(JSON dir GET "${json}" tests 0 properties ${i} value)
    endif()
  endforeach()
  # Without the libFuzzer pass (run_generated.sh's last argument, FUZZER): it reads the inputs
  # and writes only to scratch/, outside the fingerprint, so the second run would repeat it for
  # nothing (42 s -> 30 s of this test in the release preset).
  list(LENGTH command n)
  if(n EQUAL 9)
    list(GET command 1 script)
    if(script MATCHES "run_generated\\.sh$")
      list(REMOVE_AT command 8)
    endif()
  endif()
  execute_process(COMMAND ${prefix} ${CMAKE_COMMAND} -E env ${env} ${command}
                  WORKING_DIRECTORY ${dir}
                  OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fuzz.${name} failed when run again (${prefix}):\n${out}")
  endif()
endfunction()

set(aslr_off "")
execute_process(COMMAND uname -m OUTPUT_VARIABLE machine OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND setarch ${machine} -R true RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(rc EQUAL 0)
  set(aslr_off setarch ${machine} -R)
else()
  message(STATUS "setarch -R is not available here; the second runs keep address randomisation")
endif()

string(REPLACE "," ";" names "${NAMES}")
set(failed "")
foreach(name IN LISTS names)
  file(GLOB kept ${FUZZ_DIR}/${name}/corpus/*)
  if(NOT EXISTS ${FUZZ_DIR}/${name}/inputs.txt AND NOT kept)  # never run in this build tree
    run_again(${name} "")
  endif()
  fingerprint(${name} first)
  run_again(${name} "${aslr_off}")
  fingerprint(${name} second)
  file(WRITE ${FUZZ_DIR}/determinism.${name}.first "${first}")
  file(WRITE ${FUZZ_DIR}/determinism.${name}.second "${second}")
  if(first STREQUAL second)
    string(REGEX MATCHALL "\n" lines "${first}")
    list(LENGTH lines n)
    message(STATUS "fuzz.${name}: the same inputs in both runs (${n} lines of fingerprint)")
  else()
    execute_process(COMMAND diff ${FUZZ_DIR}/determinism.${name}.first
                                 ${FUZZ_DIR}/determinism.${name}.second
                    OUTPUT_VARIABLE difference)
    string(SUBSTRING "${difference}" 0 2000 difference)
    message(STATUS "fuzz.${name}: the two runs differ (< first, > second):\n${difference}")
    list(APPEND failed fuzz.${name})
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "not reproducible: ${failed}")
endif()
