// Image decoding for `vitkd prepare folder` (data/image_folder.hpp): PNG
// through libpng and JPEG through libjpeg(-turbo), into 1 or 3 channels as
// PIL's convert("L") / convert("RGB") gives them.
#include <csetjmp>
#include <cerrno>
#include <cstdio>
#include <cstring>

// libjpeg needs <cstdio> before its header.
#include <jpeglib.h>
#include <png.h>

#include "data/image_folder.hpp"
#include "data/jpeg_error.hpp"

namespace vitkd {
namespace {

constexpr int64_t kMaxPixels = int64_t(1) << 28;  // refuse absurd image sizes (256 Mpixel)

// ---- decoding -----------------------------------------------------------------

std::string decode_png(const std::string& path, int64_t channels, Image& out) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str())) {
    std::string m = img.message;
    png_image_free(&img);
    return "corrupt PNG: " + m;
  }
  if (int64_t(img.width) * img.height > kMaxPixels) {
    png_image_free(&img);
    return "PNG of " + std::to_string(img.width) + "x" + std::to_string(img.height) +
           " pixels is too large";
  }
  img.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  // 16-bit files without gamma information are sRGB-encoded like 8-bit ones
  // (libpng would otherwise take them as linear and brighten them).
  img.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  out.height = img.height;
  out.width = img.width;
  out.channels = channels;
  out.pixels.assign(PNG_IMAGE_SIZE(img), 0);  // alpha is composited onto these zeros (black)
  if (!png_image_finish_read(&img, nullptr, out.pixels.data(), 0, nullptr)) {
    std::string m = img.message;
    png_image_free(&img);
    return "corrupt PNG: " + m;
  }
  return "";
}

// A CMYK JPEG's pixels (4 channels) to RGB, or to grey for channels == 1, in
// place, as PIL decodes and converts them: PIL reads every CMYK JPEG with
// Adobe's inverted inks (raw mode "CMYK;I"), and each of R, G, B is
// (255 - ink) * (255 - K) / 255 rounded as PIL's MULDIV255; grey is then
// PIL's L = (19595 R + 38470 G + 7471 B + 32768) >> 16.
void cmyk_to_rgb(Image& im, int64_t channels) {
  const size_t n = static_cast<size_t>(im.height * im.width);
  const unsigned flip = 255;
  auto muldiv255 = [](unsigned a, unsigned b) {
    const unsigned t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  std::vector<uint8_t> out(n * static_cast<size_t>(channels));
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &im.pixels[4 * i];
    const unsigned nk = 255 - (p[3] ^ flip);
    unsigned rgb[3];
    for (int c = 0; c < 3; ++c) rgb[c] = nk - muldiv255(p[c] ^ flip, nk);
    if (channels == 1)
      out[i] = static_cast<uint8_t>((19595 * rgb[0] + 38470 * rgb[1] + 7471 * rgb[2] + 32768) >> 16);
    else
      for (int c = 0; c < 3; ++c) out[3 * i + c] = static_cast<uint8_t>(rgb[c]);
  }
  im.pixels = std::move(out);
  im.channels = channels;
}

// No C++ object with a destructor lives between setjmp and a libjpeg call
// that may longjmp back; `out` belongs to the caller.
std::string decode_jpeg(const std::string& path, int64_t channels, Image& out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::string("cannot open: ") + std::strerror(errno);
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_error_install(err);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    std::fclose(f);
    return std::string("corrupt JPEG: ") + err.message;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, f);
  jpeg_read_header(&cinfo, TRUE);
  // CMYK and YCCK JPEGs (print workflows; ImageNet-1k's training set holds 22)
  // come out as CMYK (libjpeg converts YCCK) and become RGB below, as PIL does.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  if (int64_t(cinfo.image_width) * cinfo.image_height > kMaxPixels) {
    jpeg_destroy_decompress(&cinfo);
    std::fclose(f);
    return "JPEG too large";
  }
  jpeg_start_decompress(&cinfo);
  out.height = cinfo.output_height;
  out.width = cinfo.output_width;
  out.channels = cinfo.output_components;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * out.channels));
  const size_t stride = static_cast<size_t>(out.width * out.channels);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.pixels.data() + cinfo.output_scanline * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  std::fclose(f);
  if (err.warnings > 0) return std::string("corrupt JPEG data: ") + err.warning;
  if (cmyk) cmyk_to_rgb(out, channels);
  if (out.channels != channels) return "JPEG decoded to " + std::to_string(out.channels) + " channels";
  return "";
}

}  // namespace

std::string decode_image(const std::string& path, int64_t channels, Image& out) {
  unsigned char magic[8] = {0};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::string("cannot open: ") + std::strerror(errno);
  const size_t got = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  if (got >= 8 && png_sig_cmp(magic, 0, 8) == 0) return decode_png(path, channels, out);
  if (got >= 3 && magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF)
    return decode_jpeg(path, channels, out);
  char hex[40];
  std::snprintf(hex, sizeof hex, "%02x %02x %02x %02x", magic[0], magic[1], magic[2], magic[3]);
  return got == 0 ? std::string("empty file")
                  : std::string("not a PNG or JPEG file (starts with bytes ") + hex + ")";
}

}  // namespace vitkd
