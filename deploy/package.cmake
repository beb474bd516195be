# deploy/package.cmake - `cpack -G DEB` (from the build folder): a Debian
# package of what deploy/install.cmake installs, under /usr, with the
# maintainer scripts of deploy/debian/ that create the `sluice` user and its
# directories (docs/operations.md).  Included from the root CMakeLists.txt.
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "sluice")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "Sluice maintainers <sluice@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "multi-tenant LLM inference service: TLS gateway and GPU/CPU workers")
set(CPACK_PACKAGE_DESCRIPTION
    "An HTTPS gateway that authenticates one API key per client, enforces per-team\nquotas, keeps fair queues and routes requests to worker processes that own\nthe model weights and the KV cache. Speaks the Ollama and OpenAI APIs.")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
# install with DESTDIR, so that the install rules see the prefix /usr (the
# units then name /usr/bin and /etc/sluice)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# the libraries the binaries link (dpkg-shlibdeps); libraries no package
# owns (a CUDA toolkit from NVIDIA's installer) are left to the operator
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "/usr/local/cuda/lib64;/usr/local/cuda/targets/x86_64-linux/lib")
# groupadd and useradd in postinst
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "redis-server")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/deploy/debian/postinst;${PROJECT_SOURCE_DIR}/deploy/debian/prerm;${PROJECT_SOURCE_DIR}/deploy/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
