"""Peer managers: resource exchange and job forwarding between isthmus managers (Villegas
dissertation ch. 4; IBM meta-scheduler seed), simulated on one clock (`simulated`, `run`)."""
