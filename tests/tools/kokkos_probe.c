/* A Kokkos tool (the profiling interface Kokkos loads with
 * --kokkos-tools-library / --kokkos-tools-libs): appends "init" and the name
 * of every parallel_for to the file named by VITKD_KOKKOS_PROBE_OUT, so that
 * tests/e2e/e2e_kokkos_args.sh sees that Kokkos started and got the argument. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void note(const char* what) {
  const char* path = getenv("VITKD_KOKKOS_PROBE_OUT");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (!f) return;
  fprintf(f, "%s\n", what);
  fclose(f);
}

void kokkosp_init_library(int seq, uint64_t version, uint32_t ndevices, void* devices) {
  (void)seq, (void)version, (void)ndevices, (void)devices;
  note("init");
}
void kokkosp_finalize_library(void) { note("finalize"); }
void kokkosp_begin_parallel_for(const char* name, uint32_t device, uint64_t* id) {
  (void)device;
  *id = 0;
  note(name);
}
void kokkosp_end_parallel_for(uint64_t id) { (void)id; }
