#pragma once
// Guards against damaged HDF5 files. HDF5 1.10 (Debian's) decodes a file's metadata trusting
// what it reads, and some corrupt files make it crash, overread or loop forever (the fuzzers of
// tests/fuzz/ found such files). Two guards, both applied to every input file:
//
// 1. A preflight in a child process. Before a tool opens an input, a forked child opens it and
//    reads everything the tool may read of it: under the object the tool names (the whole file
//    when it names none, or a name that is not there) every object and link, every attribute,
//    every dataset's type, shape and layout, and the data of datasets up to 64 MiB; the root and
//    the groups on the way to the object with their attributes. InputFiles checks each part of a
//    file before it touches it (a tool reading one weight group of a file of many models walks
//    that group, not the file: decode on a 1,456-object golden file 0.12 -> 0.05 s here). HDF5 is
//    deterministic, so a file that crashes or hangs the child would do the same to the tool;
//    such a file is refused with one line instead. A file the child reads cleanly costs a fork;
//    the files of one run are checked by one child, one after the other (preflight_all): three
//    children side by side cost attn-score 7-8 ms where one costs 3 ms.
//
// 2. The global heap, where variable-length strings (h5py's str attributes) live. HDF5 trusts
//    the heap collection a string points into: a corrupt one makes H5Aread loop forever (an
//    object of index 0 and size 0 never moves the parser on, in H5HG__cache_heap_deserialize)
//    or copy past its buffers (an index or size beyond the collection). Before reading such a
//    string we take its heap ID from the raw attribute bytes and parse that collection
//    ourselves, the way HDF5 will, refusing what HDF5 would mishandle. This one is exact and
//    cheap, and guards the tool itself, not only the child.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

// Runs the preflight of guard 1: `open` (called in the child) opens the file read-only, and the
// child reads `scope` of it (an absolute path, normalized; "/": the whole file). Throws
// Error("`label`: ...damaged...") when the child crashes or does not finish within the timeout.
void preflight(const std::function<std::int64_t()>& open, const std::string& label, const std::string& scope = "/");
// The preflights of several files by one child, in the order given, within one time limit: the
// first file that crashes, fails or hangs it is named in the Error (the child tells the parent
// which file it starts; the files after it are not checked). `meanwhile`, when given, runs in the
// parent while the child reads (if it throws, the child is killed and the exception passes on).
// `scopes[i]` is the part of file i to read (as for preflight; missing: the whole file).
void preflight_all(const std::vector<std::function<std::int64_t()>>& opens, const std::vector<std::string>& labels,
                   const std::function<void()>& meanwhile = {}, const std::vector<std::string>& scopes = {});
// The preflight's time limit (default 60 s; the fuzzers use less than their own hang timeout).
void set_preflight_timeout(double seconds);

// Throws Error("`where`: attribute 'name' ...: corrupt global heap ...") unless reading the
// variable-length string attribute `attr` (an HDF5 attribute id) is safe.
void check_vlen_string_attribute(std::int64_t attr, const std::string& where, const std::string& name);
// The same for the `count` strings of a variable-length string dataset `ds` (an HDF5 dataset id).
void check_vlen_string_dataset(std::int64_t ds, std::int64_t count, const std::string& label);

} // namespace attn::h5
