# Writes a C++ source defining one string constant with the text of a file, so a binary carries
# the file (e.g. CUDA source that NVRTC compiles at run time) without it being copied by hand.
#   cmake -DIN=<file> -DOUT=<source.cpp> -DNAME=<qualified name, e.g. fieldflow::bench::text> -P embed_text.cmake
file(READ "${IN}" text)
set(delimiter "ff_embed")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )${delimiter}\"")
endif()
string(REGEX REPLACE "::[A-Za-z_0-9]+$" "" namespace "${NAME}")
string(REGEX REPLACE "^.*::" "" symbol "${NAME}")
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by cmake/embed_text.cmake: edit that file, not this one.\n"
  "namespace ${namespace} {\n"
  "extern const char* const ${symbol};\n"
  "const char* const ${symbol} = R\"${delimiter}(${text})${delimiter}\";\n"
  "}\n")
# Only a changed text touches the output (no needless recompiles).
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
