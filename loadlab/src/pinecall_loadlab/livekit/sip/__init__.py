"""LiveKit SIP on the stand-in: trunks, dispatch rules, inbound calls and outbound legs."""
