#pragma once
// libjpeg's error manager for vitkd's JPEG code (image_decode.cpp,
// jpeg_codec.cpp): an error longjmps to `jump` with libjpeg's message in
// `message`; a warning (damaged data libjpeg works around) is counted, the
// first one's text kept in `warning`. No C++ object with a destructor may
// live between the setjmp and a libjpeg call that may longjmp back.
#include <csetjmp>
#include <cstdio>

// libjpeg needs <cstdio> before its header.
#include <jpeglib.h>

namespace vitkd {

struct JpegError {
  jpeg_error_mgr pub;  // first member: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  int warnings;
  char warning[JMSG_LENGTH_MAX];
};

/// Clears `e` and makes it the error manager: `cinfo.err = jpeg_error_install(e)`
/// before jpeg_create_compress / jpeg_create_decompress.
jpeg_error_mgr* jpeg_error_install(JpegError& e);

}  // namespace vitkd
