# Proves that the production pillar-agent does not contain the configfs
# simulator: it refuses --simulate-configfs as an unknown flag, and neither
# the simulator's code nor the flag appears in the binary, while both appear
# in pillar-agent-sim (the control that keeps the string check honest).
# cmake -DAGENT=<pillar-agent> -DAGENT_SIM=<pillar-agent-sim> -P <this file>

foreach(var AGENT AGENT_SIM)
  if(NOT EXISTS "${${var}}")
    message(FATAL_ERROR "${var}=${${var}} does not exist")
  endif()
endforeach()

# "--pool=x" is malformed, so an agent that accepted the flag would still exit
# at once (status 2) instead of serving.
execute_process(COMMAND "${AGENT}" --pool=x --simulate-configfs
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 30)
if(rc EQUAL 0 OR rc EQUAL 2 OR NOT "${out}${err}" MATCHES "not expected: --simulate-configfs")
  message(FATAL_ERROR "pillar-agent did not refuse --simulate-configfs as an unknown flag "
    "(exit ${rc}):\n${out}${err}")
endif()

set(pattern "ConfigfsSim|simulate-configfs|configfs is SIMULATED")
file(STRINGS "${AGENT}" hits REGEX "${pattern}" LIMIT_COUNT 5)
if(hits)
  message(FATAL_ERROR "pillar-agent contains the configfs simulator: ${hits}")
endif()
file(STRINGS "${AGENT_SIM}" control REGEX "ConfigfsSim" LIMIT_COUNT 1)
if(NOT control)
  message(FATAL_ERROR "pillar-agent-sim shows no ConfigfsSim: the string check proves nothing")
endif()
message(STATUS "pillar-agent refuses --simulate-configfs and contains no ConfigfsSim")
