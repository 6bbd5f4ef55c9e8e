// The HDF5 plumbing the HDF5 layer's files share: error reporting, property lists, attributes of
// strings, type layouts and selections. Private to lib/src/h5 (the only includer of <hdf5.h>).
#pragma once

#include "attn/core/half.hpp"
#include "attn/core/tensor.hpp"
#include "attn/h5/h5io.hpp"

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attn::h5 {

// HDF5's printing of its error stack off, and its shutdown at exit (once per process).
void silence_hdf5();
// The most specific message on HDF5's error stack, or "", on one line.
std::string hdf5_reason();
// msg, with HDF5's reason in parentheses when it has one.
std::string with_reason(std::string msg);
// id, or an Error with `what` (and HDF5's reason) when it is negative.
hid_t check_id(hid_t id, const std::string& what);
void check_ok(herr_t status, const std::string& what);

// File access without HDF5's file locking.
Handle unlocked_access();
// Every MPI rank opens the file together (MPI-IO).
void set_parallel_access(hid_t fapl);
// Outputs' dataset and group creation: no modification times, space allocated at creation.
Handle output_dataset_creation();
Handle output_group_creation();
// Creates the groups on the way to `path` that do not exist yet.
void create_parent_groups(hid_t file, const std::string& path, const std::string& label);
// HDF5's signature at offset 0, 512, 1024, 2048, ... of `data`.
bool has_hdf5_signature(const char* data, std::size_t size);

// Does `path` resolve to an object (every link on the way exists and is not dangling)?
bool object_exists(hid_t file, const std::string& path);
H5I_type_t object_type(hid_t file, const std::string& path);
// A string attribute (fixed or variable length, scalar or one-element); nullopt if absent.
std::optional<std::string> read_string_attr(hid_t obj, const char* name, const std::string& where);
void write_string_attr(hid_t obj, const char* name, const std::string& value);

// The 2-byte float layouts the tools widen themselves (IEEE binary16, bfloat16), or nullopt.
std::optional<HalfKind> half_layout_of(hid_t type);
// "float32", "bfloat16", "uint8", "string", ...: a type's name for messages.
std::string type_name_of(hid_t type);
template <typename T> hid_t native_type();
template <> inline hid_t native_type<float>() { return H5T_NATIVE_FLOAT; }
template <> inline hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }
template <> inline hid_t native_type<std::int64_t>() { return H5T_NATIVE_INT64; }
// A little-endian 2-byte float type with `exponent` and `mantissa` bits.
hid_t make_half_type(std::size_t exponent, std::size_t mantissa);
// The file type an output of type t is written as.
hid_t file_type(OutType t);

// The box of `extent` values from `start` of a dataset: its file space and a matching memory space.
std::pair<Handle, Handle> box_selection(hid_t ds, const std::vector<hsize_t>& start, const std::vector<hsize_t>& extent,
                                        const std::string& what);
// Rows [first, first + count) along axis 0 of a dataset of `shape`.
std::pair<Handle, Handle> row_selection(hid_t ds, const Shape& shape, std::int64_t first, std::int64_t count);
// Values in one row (axis 0) of `shape`.
std::int64_t row_size(const Shape& shape);

} // namespace attn::h5
