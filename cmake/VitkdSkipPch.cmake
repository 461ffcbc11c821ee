# vitkd_skip_pch_without_torch(<source>...)
#
# torch/torch.h is precompiled for vitkd_lib (and reused by the test
# binaries), and a target's precompiled header is loaded by every one of its
# sources: about 15 s a source on a 2-core AMD EPYC (2026-12-02), even for one
# that never includes LibTorch. This marks each given C++ source whose
# includes, followed through the project's own headers (quoted includes found
# beside the file, under src/ or under tests/), reach no LibTorch header
# (<torch/...>, <ATen/...>, <c10/...>) with SKIP_PRECOMPILE_HEADERS, so that it
# compiles without it (experiments/performance-log.md, 2026-12-02). Conservative: an
# include inside #if counts, and a quoted include that cannot be found keeps
# the header. Call it in the directory that adds the target (source file
# properties are per directory).
function(vitkd_skip_pch_without_torch)
  set(skipped 0)
  foreach(src IN LISTS ARGN)
    get_filename_component(src "${src}" ABSOLUTE)
    if(NOT src MATCHES "\\.(cpp|cc|cxx)$" OR NOT EXISTS "${src}")
      continue()
    endif()
    set(todo "${src}")
    set(seen "")
    set(torch FALSE)
    while(todo AND NOT torch)
      list(POP_FRONT todo f)
      if(f IN_LIST seen)
        continue()
      endif()
      list(APPEND seen "${f}")
      get_filename_component(dir "${f}" DIRECTORY)
      file(STRINGS "${f}" includes REGEX "^[ \t]*#[ \t]*include")
      foreach(line IN LISTS includes)
        if(line MATCHES "include[ \t]*<(torch|ATen|c10)/")
          set(torch TRUE)
          break()
        elseif(line MATCHES "include[ \t]*\"([^\"]+)\"")
          set(found "")
          foreach(base "${dir}" "${PROJECT_SOURCE_DIR}/src" "${PROJECT_SOURCE_DIR}/tests")
            if(EXISTS "${base}/${CMAKE_MATCH_1}")
              get_filename_component(found "${base}/${CMAKE_MATCH_1}" ABSOLUTE)
              break()
            endif()
          endforeach()
          if(found STREQUAL "")
            set(torch TRUE)
            break()
          endif()
          list(APPEND todo "${found}")
        endif()
      endforeach()
    endwhile()
    if(NOT torch)
      set_source_files_properties("${src}" PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      math(EXPR skipped "${skipped} + 1")
    endif()
  endforeach()
  list(LENGTH ARGN n)
  set(VITKD_PCH_SKIPPED "${skipped} of ${n}" PARENT_SCOPE)
endfunction()
