//! `sqos synth`: a deterministic generator of Hyper-V ↔ Scale-Out File Server traffic. STUB.
