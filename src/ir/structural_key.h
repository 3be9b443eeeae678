#pragma once
// A byte string that identifies a program exactly: two programs have the same key only if every
// field of every parameter, statement and expression node is equal (floating literals bit for bit)
// and their expression graphs share nodes alike. The compile driver hashes it to find a program's
// generated source without generating it again (driver/source_index.h), so "exactly" is the
// contract: whatever a later stage may read must be in the key.
#include <string>

#include "fieldflow/ir.h"

namespace fieldflow::ir {

std::string structural_key(const Program& p);

}  // namespace fieldflow::ir
