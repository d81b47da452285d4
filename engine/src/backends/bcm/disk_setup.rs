//! BCM's disk setup: the partition layout XML (`disksetup` on a node or its category) that
//! the node-installer lays out on a FULL install. gpufleet reads only which block devices it
//! names, to clear every one of them when a node is wiped.
//!
//! ```xml
//! <diskSetup>
//!   <device>
//!     <blockdev>/dev/sda</blockdev>
//!     <partition id="a1">…</partition>
//!   </device>
//!   <device><blockdev>/dev/nvme0n1</blockdev>…</device>
//! </diskSetup>
//! ```
//!
//! A `<device>` may list several `<blockdev>` alternatives (the installer uses the first that
//! exists); every one is returned, since clearing one that does not exist does no harm.

/// Why a disk setup could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiskSetupError {
    /// The text is not well-formed XML.
    #[error("the disk setup is not well-formed XML: {0}")]
    Xml(#[source] roxmltree::Error),
    /// The root element is not `<diskSetup>`.
    #[error("the disk setup's root element is <{0}>, not <diskSetup>")]
    Root(String),
}

/// The block devices a disk setup names, in order, each once.
pub fn block_devices(xml: &str) -> Result<Vec<String>, DiskSetupError> {
    let doc = roxmltree::Document::parse(xml).map_err(DiskSetupError::Xml)?;
    let root = doc.root_element();
    if root.tag_name().name() != "diskSetup" {
        return Err(DiskSetupError::Root(root.tag_name().name().to_owned()));
    }
    let mut out: Vec<String> = Vec::new();
    let devices = root
        .children()
        .filter(|n| n.is_element() && n.tag_name().name() == "device");
    for device in devices {
        let names = device
            .children()
            .filter(|n| n.is_element() && n.tag_name().name() == "blockdev")
            .filter_map(|n| n.text())
            .map(str::trim)
            .filter(|t| !t.is_empty());
        for name in names {
            if !out.iter().any(|o| o == name) {
                out.push(name.to_owned());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DGX: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<diskSetup xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <device>
    <blockdev>/dev/sda</blockdev>
    <blockdev mode="cloud">/dev/vda</blockdev>
    <partition id="a1"><size>max</size><type>linux</type><filesystem>xfs</filesystem>
      <mountPoint>/</mountPoint></partition>
  </device>
  <device><blockdev>/dev/nvme0n1</blockdev><partition id="r0"><size>max</size><type>linux raid</type></partition></device>
  <device><blockdev> /dev/nvme1n1 </blockdev></device>
  <device><blockdev>/dev/nvme1n1</blockdev></device>
  <raid id="md0"><member>r0</member><level>0</level></raid>
</diskSetup>"#;

    #[test]
    fn every_device_of_the_layout_once() {
        assert_eq!(
            block_devices(DGX).expect("parses"),
            ["/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/nvme1n1"]
        );
        assert_eq!(block_devices("<diskSetup/>"), Ok(Vec::new()));
    }

    #[test]
    fn bad_xml_is_an_error_not_an_empty_list() {
        let e = block_devices("<diskSetup><device>").expect_err("unclosed");
        assert!(matches!(e, DiskSetupError::Xml(_)));
        assert!(std::error::Error::source(&e).is_some(), "roxmltree's error");
        assert!(matches!(
            block_devices("<partitions/>"),
            Err(DiskSetupError::Root(r)) if r == "partitions"
        ));
    }
}
