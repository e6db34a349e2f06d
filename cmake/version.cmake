# The version every binary prints with --version: the project version, plus
# "+g<commit>" when git can name the commit at configure time (and ".dirty"
# when tracked files differ from it). Without git, or outside a work tree, it
# is the project version alone; never an error. scripts/build.sh configures on
# every run, so its builds carry the current commit.
# Generates ${PILLAR_VERSION_SOURCE} (the definitions of common/version.h).
set(PILLAR_VERSION_STRING ${PROJECT_VERSION})
set(PILLAR_GIT_COMMIT "")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${CMAKE_SOURCE_DIR} rev-parse --verify -q HEAD
    RESULT_VARIABLE _pillar_git_rc OUTPUT_VARIABLE _pillar_git_head ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_pillar_git_rc EQUAL 0 AND _pillar_git_head MATCHES "^[0-9a-f]+$")
    set(PILLAR_GIT_COMMIT ${_pillar_git_head})
    string(SUBSTRING ${_pillar_git_head} 0 7 _pillar_git_short)
    set(PILLAR_VERSION_STRING "${PROJECT_VERSION}+g${_pillar_git_short}")
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${CMAKE_SOURCE_DIR} diff --quiet HEAD --
      RESULT_VARIABLE _pillar_git_dirty OUTPUT_QUIET ERROR_QUIET)
    if(_pillar_git_dirty EQUAL 1)
      string(APPEND PILLAR_VERSION_STRING ".dirty")
    endif()
  endif()
endif()
set(PILLAR_VERSION_SOURCE ${CMAKE_BINARY_DIR}/gen/version/version.cc)
# configure_file rewrites the file only when its content changes.
configure_file(${CMAKE_SOURCE_DIR}/src/common/version.cc.in ${PILLAR_VERSION_SOURCE} @ONLY)
message(STATUS "pillar version ${PILLAR_VERSION_STRING}")
