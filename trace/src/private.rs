//! Trace files are private: every writer creates them with mode 0600 (owner only, on Unix),
//! whether the file is new or replaces one, since a trace may hold what a cluster sent.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Creates (or truncates) `path` for writing, with mode 0600. An existing file keeps no
/// mode of its own: its permissions are set to 0600 before anything is written (the mode
/// `open` is given applies only to a file it creates). Missing directories are created.
///
/// # Errors
/// The directory or the file could not be created, or its mode not set.
pub fn create_private(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let file = options.open(path)?;
    make_private(&file)?;
    Ok(file)
}

#[cfg(unix)]
fn make_private(file: &File) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn make_private(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Writes `bytes` to `path` whole: through `path.partial`, created with mode 0600, synced,
/// then renamed into place, so a reader never sees half a file and the file at `path` is
/// 0600 whatever was there before.
///
/// # Errors
/// The directory or file could not be written.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_private_with(path, |file| file.write_all(bytes))
}

/// [`write_private`], with the contents written by `write` as it goes (buffered), so a
/// large trace need not be held in memory whole before it is written.
///
/// # Errors
/// The directory or file could not be written, or `write` failed.
pub fn write_private_with(
    path: &Path,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let _ = std::fs::remove_file(&partial);
    let mut file = io::BufWriter::new(create_private(&partial)?);
    write(&mut file)?;
    let file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&partial, path)
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn an_overwritten_file_becomes_private_too() {
        let dir = std::env::temp_dir().join(format!("reconcile-private-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, write) in [("streamed", true), ("whole", false)] {
            let path = dir.join(name);
            std::fs::write(&path, "old").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            if write {
                create_private(&path).unwrap().write_all(b"new").unwrap();
            } else {
                write_private(&path, b"new").unwrap();
            }
            assert_eq!(mode(&path), 0o600, "{name}");
            assert_eq!(std::fs::read(&path).unwrap(), b"new");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
