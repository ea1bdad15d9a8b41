# docs/options.md is `batchcast-server serve --help-markdown`, committed: this
# fails when the option table changed and the file was not regenerated.
#   cmake -DSERVER=<batchcast-server> -DDOC=<docs/options.md> -P options_doc_test.cmake
execute_process(COMMAND "${SERVER}" serve --help-markdown
  OUTPUT_VARIABLE generated ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SERVER} serve --help-markdown failed (${rc}): ${errors}")
endif()
if(NOT EXISTS "${DOC}")
  message(FATAL_ERROR "${DOC} is missing. Generate it:\n  ${SERVER} serve --help-markdown > ${DOC}")
endif()
file(READ "${DOC}" committed)
if(NOT generated STREQUAL committed)
  message(FATAL_ERROR "${DOC} is stale: it differs from what the option table prints "
    "(server/src/option_table.cc). Regenerate it:\n"
    "  ${SERVER} serve --help-markdown > ${DOC}\n"
    "(from the repository root, with the default build: "
    "build/tools/batchcast-server serve --help-markdown > docs/options.md)")
endif()
