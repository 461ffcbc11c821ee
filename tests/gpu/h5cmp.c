/* h5cmp: compares the float32 datasets of two vitkd checkpoints, for the
 * GPU checks (tests/gpu/checks.sh) on machines whose Python has no h5py or
 * numpy (the same numbers as tests/tools/compare_checkpoints.py --rel-l2
 * --json, without Python). Built by CMake with the tests (target
 * vitkd_h5cmp, against the HDF5 vitkd uses).
 *
 *   h5cmp A.h5 B.h5 [GROUP ...]      (default groups: model)
 *
 * Prints one JSON object: per group the relative L2 distance
 * ||a-b|| / ||a|| over all of the group's datasets together and the largest
 * |a-b|; overall the worst relative L2, the largest |a-b|, whether every
 * dataset is bitwise equal, how many datasets, and both files' "step"
 * attribute. In the group "optimizer" only the first `numel` elements (the
 * attribute of /optimizer) are compared, as compare_checkpoints.py does.
 * Exit status 0 when both files could be read and every dataset has the same
 * size in both, 1 otherwise (the tolerance is the caller's decision). */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  hid_t fb;
  const char *group;
  long long numel; /* < 0: all elements */
  double dsq, rsq, maxabs;
  int bitwise, count, error;
} Acc;

static float *read_all(hid_t file, const char *path, hssize_t *n) {
  hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
  if (d < 0) return NULL;
  hid_t s = H5Dget_space(d);
  *n = H5Sget_simple_extent_npoints(s);
  float *buf = malloc(sizeof(float) * (size_t)(*n > 0 ? *n : 1));
  if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
    free(buf);
    buf = NULL;
  }
  H5Sclose(s);
  H5Dclose(d);
  return buf;
}

static herr_t visit(hid_t group, const char *name, const H5L_info_t *info, void *op) {
  (void)info;
  Acc *acc = op;
  char path[1024];
  snprintf(path, sizeof path, "/%s/%s", acc->group, name);
  H5O_info_t oi;
  if (H5Oget_info_by_name(group, name, &oi, H5P_DEFAULT) < 0 || oi.type != H5O_TYPE_DATASET) return 0;
  hssize_t na = 0, nb = 0;
  float *a = read_all(group, name, &na);
  float *b = read_all(acc->fb, path, &nb);
  /* Optimizer arrays are padded to a multiple of the rank count: only their
   * first numel elements must exist in both. */
  const int sizes_ok = acc->numel >= 0 ? (na >= acc->numel && nb >= acc->numel) : na == nb;
  if (!a || !b || !sizes_ok) {
    fprintf(stderr, "h5cmp: %s: %s\n", path, (!a || !b) ? "cannot read" : "sizes differ");
    acc->error = 1;
  } else {
    hssize_t n = acc->numel >= 0 ? acc->numel : na;
    for (hssize_t i = 0; i < n; ++i) {
      const double x = a[i], d = x - (double)b[i];
      acc->dsq += d * d;
      acc->rsq += x * x;
      if (fabs(d) > acc->maxabs) acc->maxabs = fabs(d);
    }
    if (memcmp(a, b, sizeof(float) * (size_t)n) != 0) acc->bitwise = 0;
    acc->count++;
  }
  free(a);
  free(b);
  return 0;
}

static long long step_of(hid_t f) {
  long long step = -1;
  if (H5Aexists(f, "step") > 0) {
    hid_t at = H5Aopen(f, "step", H5P_DEFAULT);
    H5Aread(at, H5T_NATIVE_LLONG, &step);
    H5Aclose(at);
  }
  return step;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: h5cmp A.h5 B.h5 [GROUP ...]\n");
    return 2;
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t fa = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t fb = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (fa < 0 || fb < 0) {
    fprintf(stderr, "h5cmp: cannot open %s\n", fa < 0 ? argv[1] : argv[2]);
    return 1;
  }
  const char *defaults[] = {"model"};
  const char **groups = argc > 3 ? (const char **)argv + 3 : defaults;
  const int ngroups = argc > 3 ? argc - 3 : 1;
  double worst = 0, maxabs = 0;
  int bitwise = 1, count = 0, error = 0;
  printf("{\"a\": \"%s\", \"b\": \"%s\", \"groups\": {", argv[1], argv[2]);
  for (int g = 0; g < ngroups; ++g) {
    Acc acc = {fb, groups[g], -1, 0, 0, 0, 1, 0, 0};
    if (strcmp(groups[g], "optimizer") == 0 && H5Aexists_by_name(fa, "optimizer", "numel", H5P_DEFAULT) > 0) {
      hid_t at = H5Aopen_by_name(fa, "optimizer", "numel", H5P_DEFAULT, H5P_DEFAULT);
      H5Aread(at, H5T_NATIVE_LLONG, &acc.numel);
      H5Aclose(at);
    }
    hid_t grp = H5Gopen2(fa, groups[g], H5P_DEFAULT);
    if (grp < 0) {
      fprintf(stderr, "h5cmp: %s has no group %s\n", argv[1], groups[g]);
      error = 1;
      continue;
    }
    H5Literate(grp, H5_INDEX_NAME, H5_ITER_INC, NULL, visit, &acc);
    H5Gclose(grp);
    const double rel = sqrt(acc.dsq / (acc.rsq > 1e-300 ? acc.rsq : 1e-300));
    printf("%s\"%s\": {\"rel_l2\": %.6g, \"max_abs\": %.6g, \"bitwise\": %s, \"datasets\": %d}",
           g ? ", " : "", groups[g], rel, acc.maxabs, acc.bitwise ? "true" : "false", acc.count);
    if (rel > worst) worst = rel;
    if (acc.maxabs > maxabs) maxabs = acc.maxabs;
    bitwise = bitwise && acc.bitwise;
    count += acc.count;
    error = error || acc.error || acc.count == 0;
  }
  printf("}, \"rel_l2\": %.6g, \"max_abs\": %.6g, \"bitwise\": %s, \"datasets\": %d, "
         "\"step_a\": %lld, \"step_b\": %lld, \"ok\": %s}\n",
         worst, maxabs, bitwise ? "true" : "false", count, step_of(fa), step_of(fb),
         error ? "false" : "true");
  H5Fclose(fa);
  H5Fclose(fb);
  return error ? 1 : 0;
}
