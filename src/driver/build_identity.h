#pragma once
// Which fieldflow generated a source: the GNU build ID the linker wrote into the object (the shared
// library, or the executable it is linked into) that holds the code generators. The linker derives
// it from the linked bytes, so any change to lowering or code generation changes it.
#include <string>

namespace fieldflow::driver {

// Hex digits of the build ID, read once per process; "" when the object has none (linked with
// --build-id=none): then no generated source is ever reused by program (see cpu_source_key).
const std::string& build_identity();

}  // namespace fieldflow::driver
