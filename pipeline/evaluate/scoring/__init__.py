"""Turning rankings into numbers: the measures declared (:mod:`.measures`), computed per
survey (:mod:`.compute`) under the tie rule (:mod:`.ties`), PRISM's coverage
(:mod:`.coverage`), bootstrap intervals and paired tests (:mod:`.stats`) and the comparison
of systems against a reference (:mod:`.compare`)."""
