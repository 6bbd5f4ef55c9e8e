#pragma once
// A guard for HDF5's global heap, where variable-length strings (h5py's str attributes) live.
//
// HDF5 1.10 trusts the heap collection a string points into. A corrupt one makes H5Aread loop
// forever (an object of index 0 and size 0 never moves the parser on, in
// H5HG__cache_heap_deserialize) or copy past its buffers (an index or size beyond the
// collection). So before reading such a string we take its heap ID from the raw attribute
// bytes and parse that collection ourselves, the way HDF5 will, refusing anything HDF5 would
// mishandle. A sound file passes unchanged.

#include <cstdint>
#include <string>
#include <string_view>

namespace attn::h5 {

// Where a variable-length value lives: its length (bytes, for strings) and its global heap ID.
struct HeapId {
  std::uint64_t length = 0;
  std::uint64_t collection = 0; // file address of the heap collection; 0 = a null string
  std::uint64_t index = 0;      // object index within the collection
};

// Why HDF5 would mishandle reading object `id.index` (holding `id.length` bytes) from the heap
// collection image `heap` (the whole collection, signature first), or "" when the read is safe.
// `size_len` is the file's "size of lengths" (1 to 8 bytes).
std::string global_heap_problem(std::string_view heap, unsigned size_len, const HeapId& id);

// Throws Error("`where`: attribute 'name' ...: corrupt global heap ...") unless reading the
// variable-length string attribute `attr` (an HDF5 attribute id) is safe.
void check_vlen_string_attribute(std::int64_t attr, const std::string& where, const std::string& name);

} // namespace attn::h5
