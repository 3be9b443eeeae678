/* The descriptor behind ff_aot_program (fieldflow/aot.h): what a generated source of an
 * ahead-of-time library defines for its program. Included only by generated sources; hosts use
 * the opaque handle. load_aot reads `magic` and `descriptor_version` first, so a library generated
 * against another layout of this struct is refused instead of misread. */
#ifndef FIELDFLOW_AOT_MODULE_H
#define FIELDFLOW_AOT_MODULE_H
#ifndef __cplusplus
#error "fieldflow/aot_module.h is for generated C++ sources; C code includes the program's generated header"
#endif

#include <cstdint>

#include "fieldflow/abi.h"

/* Not fieldflow/aot.h: its C++ part pulls in the whole compile API, which generated code never uses. */
typedef struct ff_aot_program ff_aot_program;
namespace fieldflow {
class AotPrograms;
namespace aot {
void builtin_examples(AotPrograms& programs); /* the registration of libraries written by `fieldflow aot` */
}
}  // namespace fieldflow

#define FF_AOT_MAGIC 0x66664151u /* "ffAQ" */
/* Version 2 appended the backend and the CUDA image; version 1 descriptors (cpu) are still read. */
#define FF_AOT_DESCRIPTOR_VERSION 2

struct ff_aot_program {
  std::uint32_t magic;               /* FF_AOT_MAGIC */
  std::int32_t descriptor_version;   /* FF_AOT_DESCRIPTOR_VERSION of the generator */
  std::int32_t abi_version;          /* FF_ABI_VERSION of the generator */
  std::int32_t (*module_abi_version)(void); /* FF_ABI_VERSION the generated code was compiled with */
  std::int32_t (*run)(const ff_call* call); /* cpu; null for cuda (the kernels are in `cubin`) */
  void (*programs)(fieldflow::AotPrograms&); /* the library's registration function */
  const char* library;
  const char* name;           /* registered name of the program */
  const char* symbol_prefix;  /* of run and module_abi_version */
  const char* layout;         /* to_string(Layout) */
  const char* static_scalars; /* canonical "name=value;" text, in name order */
  const char* hash;           /* XXH3-128 of generated source + schedule + pipeline, 32 hex digits */
  /* Since version 2. */
  const char* backend;                 /* to_string(Backend): "cpu" or "cuda" */
  const unsigned char* cubin;          /* cuda: the kernels, a CUDA ELF image (NVRTC's cubin); cpu: null */
  std::uint64_t cubin_bytes;
  const char* cuda_arch;               /* cuda: the image's architecture, "sm_90"; cpu: "" */
};

#endif /* FIELDFLOW_AOT_MODULE_H */
