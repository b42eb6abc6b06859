"""Slotmarket on CloudLab: N bare-metal nodes on one LAN, Ubuntu 22.04.

node "master" (10.10.1.1) runs slotmarket-master; "agent1".."agentN-1" (10.10.1.2 ...)
run slotmarket-agent with data_mode = "local": no shared file system. See
docs/cloudlab.md in the Slotmarket repository for the steps after instantiation.

Instructions:
Wait for every node to be ready, then follow docs/cloudlab.md from "Build".
"""

import geni.portal as portal
import geni.rspec.pg as pg

UBUNTU = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"

pc = portal.Context()
pc.defineParameter("nodes", "Nodes (one master, the others agents)", portal.ParameterType.INTEGER, 4)
pc.defineParameter("hwtype", "Hardware type (empty: any available)", portal.ParameterType.STRING, "")
params = pc.bindParameters()
if params.nodes < 2:
    pc.reportError(portal.ParameterError("Slotmarket needs a master and at least one agent", ["nodes"]))
pc.verifyParameters()

request = pc.makeRequestRSpec()
lan = request.LAN("lan")
for i in range(params.nodes):
    name = "master" if i == 0 else "agent%d" % i
    node = request.RawPC(name)
    node.disk_image = UBUNTU
    if params.hwtype:
        node.hardware_type = params.hwtype
    iface = node.addInterface("if1")
    iface.addAddress(pg.IPv4Address("10.10.1.%d" % (i + 1), "255.255.255.0"))
    lan.addInterface(iface)

pc.printRequestRSpec(request)
