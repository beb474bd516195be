# deploy/install.cmake - `cmake --install BUILD [--prefix P]`: the binaries,
# the systemd units (pointing at P's binaries and configuration), example
# configurations, the shipped model and the docs, in the GNUInstallDirs
# places (docs/operations.md).  Included from the root CMakeLists.txt.
include(GNUInstallDirs)

install(TARGETS sluice-worker sluice-gateway sluicectl sluice-model sluice-bench
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES deploy/examples/gateway.json deploy/examples/worker-gpu0.json
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(DIRECTORY models/ DESTINATION ${CMAKE_INSTALL_DATADIR}/sluice/models)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The units name /usr/local/bin and /etc/sluice; installed, they name the
# prefix's bin and etc (the prefix as given at install time).
foreach(unit sluice-gateway.service sluice-worker@.service)
  install(CODE "
    set(p \"\${CMAKE_INSTALL_PREFIX}\")
    if(p STREQUAL \"/usr\")
      set(etc \"/etc\")
    else()
      set(etc \"\${p}/${CMAKE_INSTALL_SYSCONFDIR}\")
    endif()
    file(READ \"${PROJECT_SOURCE_DIR}/deploy/systemd/${unit}\" u)
    string(REPLACE \"/usr/local/bin/\" \"\${p}/${CMAKE_INSTALL_BINDIR}/\" u \"\${u}\")
    string(REPLACE \"/etc/sluice/\" \"\${etc}/sluice/\" u \"\${u}\")
    set(dst \"\$ENV{DESTDIR}\${p}/lib/systemd/system/${unit}\")
    message(STATUS \"Installing: \${dst}\")
    file(WRITE \"\${dst}\" \"\${u}\")
  ")
endforeach()
