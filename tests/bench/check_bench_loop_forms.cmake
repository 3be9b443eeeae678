cmake_minimum_required(VERSION 3.25)
# The loop forms in `fieldflow bench` (docs/performance.md, "Two loop forms"): tuned, each
# horizontal-fastest mesh case of fieldflow reports the form its tuning kept; pinned with
# --loop-form, none reports one (nothing was tuned); an unknown form is refused.
# cmake -DFIELDFLOW=<fieldflow> -DOUT=<file.json> -P check_bench_loop_forms.cmake
function(run_bench)
  file(REMOVE ${OUT})
  execute_process(COMMAND ${FIELDFLOW} bench --quick --wait-idle 0 --filter "c2e2co_sum/.*/horizontal" --json ${OUT} ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fieldflow bench ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

# Counts the fieldflow results and those with a loop_form (which must be scalar or vector).
function(count_forms fieldflow_var with_form_var)
  file(READ ${OUT} report)
  string(JSON n LENGTH "${report}" results)
  math(EXPR last "${n} - 1")
  set(fieldflow 0)
  set(with_form 0)
  foreach(i RANGE ${last})
    string(JSON variant GET "${report}" results ${i} variant)
    if(variant STREQUAL "fieldflow")
      math(EXPR fieldflow "${fieldflow} + 1")
      string(JSON form ERROR_VARIABLE missing GET "${report}" results ${i} loop_form)
      if(NOT missing)
        if(NOT form MATCHES "^(scalar|vector)$")
          message(FATAL_ERROR "results[${i}].loop_form = '${form}', expected scalar or vector")
        endif()
        math(EXPR with_form "${with_form} + 1")
      endif()
    endif()
  endforeach()
  set(${fieldflow_var} ${fieldflow} PARENT_SCOPE)
  set(${with_form_var} ${with_form} PARENT_SCOPE)
endfunction()

run_bench()
count_forms(fieldflow with_form)
if(NOT fieldflow EQUAL 2 OR NOT with_form EQUAL 2)
  message(FATAL_ERROR "tuned: expected 2 fieldflow results (torus, bounded) each with its loop_form, got ${fieldflow} "
                      "results, ${with_form} with a form")
endif()

run_bench(--loop-form vector --baseline-form as_written)
count_forms(fieldflow with_form)
if(NOT fieldflow EQUAL 2 OR NOT with_form EQUAL 0)
  message(FATAL_ERROR "pinned: expected 2 fieldflow results and none with a loop_form, got ${fieldflow}, ${with_form}")
endif()

execute_process(COMMAND ${FIELDFLOW} bench --quick --loop-form fast RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "fast")
  message(FATAL_ERROR "--loop-form fast: expected a refusal naming the value, got ${rc}:\n${out}\n${err}")
endif()
