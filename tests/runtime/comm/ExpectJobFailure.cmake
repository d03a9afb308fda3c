# Runs an MPI job that must fail, and fails unless it does so properly: a
# non-zero status, output matching EXPECT, and no longer than MAX_SECONDS
# (then it is killed). Used as `cmake -D... -P ExpectJobFailure.cmake` by the
# tests that check a failing rank stops the whole job instead of hanging it.
#   MPIEXEC, NUMPROC_FLAG, RANKS, PREFLAGS, PROGRAM, ARGS, POSTFLAGS, EXPECT, MAX_SECONDS
separate_arguments(preflags UNIX_COMMAND "${PREFLAGS}")
separate_arguments(args UNIX_COMMAND "${ARGS}")
separate_arguments(postflags UNIX_COMMAND "${POSTFLAGS}")
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${MPIEXEC} ${NUMPROC_FLAG} ${RANKS} --oversubscribe --allow-run-as-root ${preflags}
          ${PROGRAM} ${postflags} ${args}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output
  TIMEOUT ${MAX_SECONDS})
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
message("${output}")
message("-- exit status '${status}' after ${seconds} s")
if(status MATCHES "timeout")
  message(FATAL_ERROR "the job hung: still running after ${MAX_SECONDS} s")
elseif(status STREQUAL "0")
  message(FATAL_ERROR "the job succeeded, but it should have failed")
elseif(NOT output MATCHES "${EXPECT}")
  message(FATAL_ERROR "the job failed, but its output does not match '${EXPECT}'")
endif()
