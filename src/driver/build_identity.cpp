#include "driver/build_identity.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace fieldflow::driver {

namespace {

struct Search {
  std::uintptr_t address;  // of a function in this object
  std::string id;
};

// The notes of one PT_NOTE segment: 4-byte aligned (name, descriptor) records after each header.
void read_build_id(const unsigned char* notes, std::size_t size, std::string& id) {
  std::size_t at = 0;
  while (at + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) header;
    std::memcpy(&header, notes + at, sizeof header);
    const std::size_t name_at = at + sizeof header;
    const std::size_t desc_at = name_at + ((header.n_namesz + 3u) & ~std::size_t{3});
    const std::size_t next = desc_at + ((header.n_descsz + 3u) & ~std::size_t{3});
    if (next > size || desc_at > size) return;
    if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 &&
        std::memcmp(notes + name_at, "GNU", 4) == 0 && header.n_descsz > 0) {
      for (std::size_t i = 0; i < header.n_descsz; ++i) id += fmt::format("{:02x}", notes[desc_at + i]);
      return;
    }
    at = next;
  }
}

int visit(dl_phdr_info* info, std::size_t, void* data) {
  auto& search = *static_cast<Search*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const std::uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && search.address >= begin && search.address < begin + ph.p_memsz;
  }
  if (!holds) return 0;
  for (int i = 0; i < info->dlpi_phnum && search.id.empty(); ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_NOTE)
      read_build_id(reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr), ph.p_memsz, search.id);
  }
  return 1;  // stop: this is the object
}

}  // namespace

const std::string& build_identity() {
  static const std::string id = [] {
    Search search{reinterpret_cast<std::uintptr_t>(&build_identity), {}};
    dl_iterate_phdr(visit, &search);
    return search.id;
  }();
  return id;
}

}  // namespace fieldflow::driver
