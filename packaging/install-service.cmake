# Runs at install time (cmake --install, cpack), included by the top-level
# cmake_install.cmake: ferry-server's systemd unit and its settings file name
# absolute paths, and those depend on the prefix given at install time, not
# at configure time. Prefix /usr (the .deb) puts them where the system looks,
# /lib/systemd/system and /etc/ferry; any other prefix keeps them inside it
# (<prefix>/lib/systemd/system, <prefix>/etc/ferry), so that an install into
# a scratch prefix writes nothing outside it. FERRY_SYSTEMD_UNITDIR and
# FERRY_SYSCONFDIR (absolute; set by the caller) override either.
# In: FERRY_SOURCE_DIR, FERRY_SYSTEMD_UNITDIR, FERRY_SYSCONFDIR.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_ferry_unitdir /lib/systemd/system)
  set(_ferry_etc /etc)
else()
  set(_ferry_unitdir ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
  set(_ferry_etc ${CMAKE_INSTALL_PREFIX}/etc)
endif()
if(FERRY_SYSTEMD_UNITDIR)
  set(_ferry_unitdir ${FERRY_SYSTEMD_UNITDIR})
endif()
if(FERRY_SYSCONFDIR)
  set(_ferry_etc ${FERRY_SYSCONFDIR})
endif()

# what the templates name (as the running system sees them: no DESTDIR)
set(FERRY_BINDIR ${CMAKE_INSTALL_PREFIX}/bin)
set(FERRY_CONFDIR ${_ferry_etc}/ferry)
set(FERRY_DOCDIR ${CMAKE_INSTALL_PREFIX}/share/doc/ferry)
set(FERRY_SYSUSERS ${CMAKE_INSTALL_PREFIX}/lib/sysusers.d/ferry.conf)

# configured straight into place (no staging file in the build tree that
# two installs at once could share) and added to install_manifest.txt
function(ferry_install_configured template dest)
  set(out "$ENV{DESTDIR}${dest}")
  message(STATUS "Installing: ${out}")
  configure_file(${template} ${out} @ONLY NO_SOURCE_PERMISSIONS)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${dest}")
  set(CMAKE_INSTALL_MANIFEST_FILES "${CMAKE_INSTALL_MANIFEST_FILES}" PARENT_SCOPE)
endfunction()

ferry_install_configured(${FERRY_SOURCE_DIR}/packaging/ferry-server.service.in
                         ${_ferry_unitdir}/ferry-server.service)
# a site's edited settings survive a reinstall; the new defaults go beside them
set(_ferry_conf ${FERRY_CONFDIR}/ferry-server.conf)
set(_ferry_in ${FERRY_SOURCE_DIR}/packaging/ferry-server.conf.in)
if(EXISTS "$ENV{DESTDIR}${_ferry_conf}")
  configure_file(${_ferry_in} "$ENV{DESTDIR}${_ferry_conf}.dist" @ONLY NO_SOURCE_PERMISSIONS)
  file(READ "$ENV{DESTDIR}${_ferry_conf}" _ferry_old)
  file(READ "$ENV{DESTDIR}${_ferry_conf}.dist" _ferry_new)
  if(_ferry_old STREQUAL _ferry_new)
    file(REMOVE "$ENV{DESTDIR}${_ferry_conf}.dist")
    message(STATUS "Up-to-date: $ENV{DESTDIR}${_ferry_conf}")
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${_ferry_conf}")
  else()
    message(STATUS "Kept: $ENV{DESTDIR}${_ferry_conf} (edited); new defaults in ${_ferry_conf}.dist")
    list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${_ferry_conf}.dist")
  endif()
else()
  ferry_install_configured(${_ferry_in} ${_ferry_conf})
endif()
