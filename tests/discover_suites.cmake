# Registers each GoogleTest suite of a test binary as one ctest test (the
# sanitizer build's tests, see tests/CMakeLists.txt): run after the binary
# is linked, it lists the binary's tests and writes CTEST_FILE, which ctest
# includes. A suite is its cases run in one process
# (`--gtest_filter='Suite.*'`).
#
# Variables (-D): TEST_EXECUTABLE, CTEST_FILE, PG_DIR (the shared
# PostgreSQL server's directory, empty when the binary needs none), WEIGHT
# (what a case of the binary costs, roughly: each suite's ctest COST is its
# number of cases times WEIGHT, so that ctest -j starts the longest first).
execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc
                TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed: ${rc}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
if(NOT WEIGHT)
  set(WEIGHT 1)
endif()
# Suites in order, and their cases counted.
set(suites "")
foreach(line IN LISTS lines)
  # A suite's line starts in the first column and ends with '.' (before an
  # optional "  # TypeParam = ..." comment); its cases are indented.
  if(line MATCHES "^([^ #][^ ]*)\\.( |$)")
    set(suite "${CMAKE_MATCH_1}")
    list(APPEND suites "${suite}")
    set(cases_${suite} 0)
  elseif(line MATCHES "^  [^ ]" AND suite)
    math(EXPR cases_${suite} "${cases_${suite}} + 1")
  endif()
endforeach()
set(content "")
foreach(suite IN LISTS suites)
  math(EXPR cost "${cases_${suite}} * ${WEIGHT}")
  string(APPEND content
    "add_test([==[${suite}]==] [==[${TEST_EXECUTABLE}]==] "
    "[==[--gtest_filter=${suite}.*]==])\n"
    "set_tests_properties([==[${suite}]==] PROPERTIES TIMEOUT 900 "
    "COST ${cost} ENVIRONMENT BACKFILL_CHECK_LOCK_ORDER=1")
  if(PG_DIR)
    string(APPEND content " FIXTURES_REQUIRED postgres "
      "ENVIRONMENT_MODIFICATION [==[BACKFILL_TEST_PG_DIR=set:${PG_DIR}]==]")
  endif()
  string(APPEND content ")\n")
endforeach()
file(WRITE "${CTEST_FILE}" "${content}")
