// h5poke FILE DATASET INDEX VALUE...: writes VALUE (an integer, converted by HDF5 to the dataset's
// type) at flat INDEX, INDEX + 1, ... of DATASET in FILE, so the CLI tests can put values another
// program might write (an int8 weight of -128) into a file the tools made, without Python.
// Exit 0, or 1 with a message.
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: h5poke FILE DATASET INDEX VALUE...\n");
    return 2;
  }
  const hid_t file = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return 1;
  const hid_t ds = H5Dopen2(file, argv[2], H5P_DEFAULT);
  if (ds < 0) return 1;
  const hid_t space = H5Dget_space(ds);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const auto n = static_cast<std::size_t>(argc - 4);
  std::vector<std::int64_t> values(n);
  std::vector<hsize_t> coords(n * static_cast<std::size_t>(rank));
  for (std::size_t i = 0; i < n; ++i) {
    values[i] = std::strtoll(argv[4 + i], nullptr, 10);
    hsize_t flat = std::strtoull(argv[3], nullptr, 10) + i;
    for (int a = rank - 1; a >= 0; --a) {
      coords[i * static_cast<std::size_t>(rank) + static_cast<std::size_t>(a)] =
          flat % dims[static_cast<std::size_t>(a)];
      flat /= dims[static_cast<std::size_t>(a)];
    }
  }
  const hsize_t count = n;
  const hid_t mem = H5Screate_simple(1, &count, nullptr);
  herr_t ok = H5Sselect_elements(space, H5S_SELECT_SET, n, coords.data());
  if (ok >= 0) ok = H5Dwrite(ds, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, values.data());
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(ds);
  if (H5Fclose(file) < 0 || ok < 0) {
    std::fprintf(stderr, "h5poke: cannot write %s:%s\n", argv[1], argv[2]);
    return 1;
  }
  return 0;
}
