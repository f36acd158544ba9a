# Included by ctest (the test folder's TEST_INCLUDE_FILES, through the
# generated nmt_tests_suites.cmake that sets NMT_TESTS_EXE, NMT_TESTS_DIR and
# NMT_TESTS_ENV): one test per GoogleTest suite of nmt_tests, all its cases in
# one process (--gtest_filter=Suite.*). A process per case cost every case a
# LibTorch start-up, about a second of CPU, ~300 times a run; a suite shares
# one. nmt_tests exits 77 (skipped) when every case it ran was skipped.
execute_process(COMMAND "${NMT_TESTS_EXE}" --gtest_list_tests
                OUTPUT_VARIABLE nmt_listing ERROR_VARIABLE nmt_listing_error RESULT_VARIABLE nmt_listing_rc)
if(NOT nmt_listing_rc EQUAL 0)
  # Not built yet, or it cannot start: one test that fails and says so.
  add_test(nmt_tests.list "${CMAKE_COMMAND}" -E echo "cannot list the cases of ${NMT_TESTS_EXE}: ${nmt_listing_rc} ${nmt_listing_error}")
  set_tests_properties(nmt_tests.list PROPERTIES WILL_FAIL TRUE)
  return()
endif()
string(REPLACE "\n" ";" nmt_lines "${nmt_listing}")
foreach(nmt_line IN LISTS nmt_lines)
  # Suites start at column 0 ("Decode." or "Attention/AttentionOp.  # ..."),
  # their cases are indented.
  if(nmt_line MATCHES "^([^ #][^ ]*)\\.")
    set(nmt_suite "${CMAKE_MATCH_1}")
    add_test("${nmt_suite}" "${NMT_TESTS_EXE}" "--gtest_filter=${nmt_suite}.*")
    set_tests_properties("${nmt_suite}" PROPERTIES WORKING_DIRECTORY "${NMT_TESTS_DIR}" ENVIRONMENT "${NMT_TESTS_ENV}"
                                                   SKIP_RETURN_CODE 77)
  endif()
endforeach()
