// h5attr FILE OBJECT NAME TYPE VALUE: sets attribute NAME of OBJECT ("/" or "/encoder") in FILE,
// replacing it, so the CLI tests can make bad weight files without Python. TYPE: int (int64),
// float (float64; "nan", "inf" allowed), bool (h5py's enum: FALSE = 0, TRUE = 1; VALUE 0 or 1) or
// string (variable-length UTF-8, as h5py writes str). Exit 0, or 1 with a message.
// h5attr FILE OBJECT NAME: prints the string attribute NAME of OBJECT and a newline (the CLI tests'
// `attr`, reading golden files: h5dump -a walks the whole file first, 90 ms on decoder.h5).
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// The read form: the string attribute (fixed or variable length) printed as stored.
int print_string_attribute(const char* path, const char* object, const char* name) {
  const hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return 1;
  const hid_t a = H5Aopen_by_name(file, object, name, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) return 1;
  const hid_t type = H5Aget_type(a);
  if (H5Tget_class(type) != H5T_STRING) return 1;
  std::string value;
  if (H5Tis_variable_str(type) > 0) {
    const hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));
    char* v = nullptr;
    if (H5Aread(a, mem, &v) < 0) return 1;
    value = v ? v : "";
    H5free_memory(v);
  } else {
    std::string buf(H5Tget_size(type), '\0');
    if (H5Aread(a, type, buf.data()) < 0) return 1;
    value = buf.substr(0, buf.find('\0'));
  }
  std::printf("%s\n", value.c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc == 4) return print_string_attribute(argv[1], argv[2], argv[3]);
  if (argc != 6) {
    std::fprintf(stderr, "usage: h5attr FILE OBJECT NAME [int|float|bool|string VALUE]\n");
    return 2;
  }
  const std::string type = argv[4], value = argv[5];
  const hid_t file = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return 1;
  const hid_t obj = H5Oopen(file, argv[2], H5P_DEFAULT);
  if (obj < 0) return 1;
  if (H5Aexists(obj, argv[3]) > 0) H5Adelete(obj, argv[3]);
  const hid_t space = H5Screate(H5S_SCALAR);
  herr_t ok = -1;
  if (type == "int") {
    const std::int64_t v = std::strtoll(value.c_str(), nullptr, 10);
    const hid_t a = H5Acreate2(obj, argv[3], H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    ok = H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
  } else if (type == "float") {
    const double v = std::strtod(value.c_str(), nullptr);
    const hid_t a = H5Acreate2(obj, argv[3], H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    ok = H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
    H5Aclose(a);
  } else if (type == "bool") {
    const hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    std::int8_t f = 0, tr = 1;
    H5Tenum_insert(t, "FALSE", &f);
    H5Tenum_insert(t, "TRUE", &tr);
    const std::int8_t v = value == "1" ? 1 : 0;
    const hid_t a = H5Acreate2(obj, argv[3], t, space, H5P_DEFAULT, H5P_DEFAULT);
    ok = H5Awrite(a, t, &v);
    H5Aclose(a);
    H5Tclose(t);
  } else if (type == "string") {
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    const char* v = value.c_str();
    const hid_t a = H5Acreate2(obj, argv[3], t, space, H5P_DEFAULT, H5P_DEFAULT);
    ok = H5Awrite(a, t, &v);
    H5Aclose(a);
    H5Tclose(t);
  } else {
    std::fprintf(stderr, "h5attr: unknown type %s\n", type.c_str());
    return 2;
  }
  H5Sclose(space);
  H5Oclose(obj);
  return H5Fclose(file) < 0 || ok < 0 ? 1 : 0;
}
