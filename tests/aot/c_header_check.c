/* The generated headers and the C part of fieldflow/aot.h are C99: this translation unit uses two of
 * them (compiled as C, not linked, by the aot_headers_are_c99 test). */
#include "fieldflow_aot_aot_test_vertical_clipped_scale.h"
#include "fieldflow_aot_aot_test_vertical_hdiff.h"

const ff_aot_program* pick(int index) {
  return index == fieldflow_aot_aot_test_vertical_hdiff_param_out ? fieldflow_aot_aot_test_vertical_hdiff()
                                                                  : fieldflow_aot_aot_test_vertical_clipped_scale();
}
