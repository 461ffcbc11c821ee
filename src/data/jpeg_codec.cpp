// JPEG in memory (data/jpeg_codec.hpp).
#include "data/jpeg_codec.hpp"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "data/jpeg_error.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

extern "C" void vitkd_jpeg_error_exit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

extern "C" void vitkd_jpeg_emit(j_common_ptr c, int level) {
  if (level >= 0) return;  // trace messages
  auto* e = reinterpret_cast<JpegError*>(c->err);
  if (e->warnings++ == 0) (*c->err->format_message)(c, e->warning);
}

}  // namespace

jpeg_error_mgr* jpeg_error_install(JpegError& e) {
  std::memset(&e, 0, sizeof e);
  jpeg_error_mgr* m = jpeg_std_error(&e.pub);
  e.pub.error_exit = vitkd_jpeg_error_exit;
  e.pub.emit_message = vitkd_jpeg_emit;
  return m;
}

// No C++ object with a destructor lives between setjmp and a libjpeg call
// that may longjmp back; the output buffer is libjpeg's (malloc'ed).
std::vector<uint8_t> jpeg_encode(const uint8_t* pixels, int64_t h, int64_t w, int64_t c, int quality) {
  jpeg_compress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_error_install(err);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(buf);
    throw RuntimeError(std::string("JPEG encoder: ") + err.message);
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = static_cast<int>(c);
  cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = static_cast<size_t>(w * c);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels) + cinfo.next_scanline * stride;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> out(buf, buf + size);
  std::free(buf);
  return out;
}

std::string jpeg_decode(const uint8_t* bytes, size_t n, int64_t h, int64_t w, int64_t c, uint8_t* out) {
  if (n < 4 || bytes[0] != 0xFF || bytes[1] != 0xD8)
    return "not JPEG data (" + std::to_string(n) + " bytes without the JPEG start marker)";
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_error_install(err);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return std::string("libjpeg: ") + err.message;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes, static_cast<unsigned long>(n));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  if (cinfo.image_width != static_cast<JDIMENSION>(w) || cinfo.image_height != static_cast<JDIMENSION>(h)) {
    const std::string got = std::to_string(cinfo.image_width) + "x" + std::to_string(cinfo.image_height);
    jpeg_destroy_decompress(&cinfo);
    return "a JPEG of " + got + " pixels where the file says " + std::to_string(w) + "x" + std::to_string(h);
  }
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_components != c) {
    jpeg_destroy_decompress(&cinfo);
    return "a JPEG of " + std::to_string(cinfo.output_components) + " channels where the file says " +
           std::to_string(c);
  }
  const size_t stride = static_cast<size_t>(w * c);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out + cinfo.output_scanline * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  // A warning (damaged data that libjpeg papers over) counts as corrupt: the
  // pixels would not be the ones prepare stored.
  if (err.warnings > 0) return std::string("libjpeg: ") + err.warning;
  return "";
}

}  // namespace vitkd
