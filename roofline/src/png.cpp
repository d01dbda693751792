// PNG export through librsvg (SVG -> cairo surface) and cairo's PNG writer, into memory first so
// that the file itself is written atomically.
#include "rafter/roofline/png.hpp"

#include <string>

#include "rafter/collector/error.hpp"
#include "rafter/collector/json_io.hpp"

#ifdef RAFTER_HAVE_RSVG
#include <cairo.h>
#include <librsvg/rsvg.h>
#endif

namespace rafter::roofline {

#ifdef RAFTER_HAVE_RSVG

bool png_supported() { return true; }

namespace {

cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

void write_png(std::string_view svg_text, const std::filesystem::path& path, double scale) {
  GError* error = nullptr;
  RsvgHandle* handle =
      rsvg_handle_new_from_data(reinterpret_cast<const guint8*>(svg_text.data()), svg_text.size(), &error);
  if (!handle) {
    std::string why = error ? error->message : "unknown error";
    if (error) g_error_free(error);
    throw InputError("cannot render PNG: the SVG does not parse (" + why + ")");
  }
  gdouble width = 0, height = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(handle, &width, &height)) width = 1000, height = 640;
  int pw = static_cast<int>(width * scale + 0.5), ph = static_cast<int>(height * scale + 0.5);
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, pw, ph);
  cairo_t* cr = cairo_create(surface);
  RsvgRectangle viewport{0, 0, static_cast<double>(pw), static_cast<double>(ph)};
  bool ok = rsvg_handle_render_document(handle, cr, &viewport, &error);
  std::string png;
  if (ok) ok = cairo_surface_write_to_png_stream(surface, append_bytes, &png) == CAIRO_STATUS_SUCCESS;
  std::string why = error ? error->message : "cairo could not encode the PNG";
  if (error) g_error_free(error);
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
  g_object_unref(handle);
  if (!ok) throw InputError("cannot render PNG: " + why);
  write_file_atomic(path, png);
}

#else

bool png_supported() { return false; }

void write_png(std::string_view, const std::filesystem::path& path, double) {
  throw InputError("cannot write " + path.string() + ": rafter was built without librsvg/cairo (PNG unsupported); "
                   "write .svg or .html instead");
}

#endif

}  // namespace rafter::roofline
